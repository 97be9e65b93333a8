"""A process that races compare-and-set on one consensus key (run by test_contract.py).

Usage: ``python race_worker.py CONSENSUS_URL KEY WORKER_ID ATTEMPTS [MODE]``. Opens the
consensus, prints ``ready`` and waits for a line on stdin (so the workers start together).

* MODE ``cas`` (default): ATTEMPTS times reads the head and tries to write the next version;
  prints one line per won version: ``won SEQNO TAG``.
* MODE ``statelog``: appends ATTEMPTS items ``WORKER:i`` to the list ``items`` of a StateLog
  state, one commit each; on a CommitConflict it reloads and retries the same item. Prints
  ``committed SEQNO TAG`` per commit and ``conflicts N`` at the end.
"""

import sys

from colmz.storage.base import VersionedData
from colmz.storage.state import CommitConflict, StateLog
from colmz.storage.url import open_consensus


def main() -> None:
    url, key, wid, attempts = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    mode = sys.argv[5] if len(sys.argv) > 5 else "cas"
    cons = open_consensus(url)
    cons.head(key)  # connected
    print("ready", flush=True)
    sys.stdin.readline()
    if mode == "statelog":
        log = StateLog(cons, key, rollup_every=4)
        seqno, state = log.load()
        conflicts = 0
        for i in range(attempts):
            tag = f"{wid}:{i}"
            while True:
                try:
                    seqno = log.commit(seqno, {**state, "items": state["items"] + [tag]})
                    state = {**state, "items": state["items"] + [tag]}
                    print(f"committed {seqno} {tag}", flush=True)
                    break
                except CommitConflict:
                    conflicts += 1
                    seqno, state = log.load()
        print(f"conflicts {conflicts}", flush=True)
        return
    for i in range(attempts):
        head = cons.head(key)
        expected = None if head is None else head.seqno
        seqno = 1 if expected is None else expected + 1
        if cons.compare_and_set(key, expected, VersionedData(seqno, f"{wid}:{i}".encode())):
            print(f"won {seqno} {wid}:{i}", flush=True)


if __name__ == "__main__":
    main()
