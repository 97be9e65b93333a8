"""A process that races compare-and-set on one consensus key (run by test_contract.py).

Usage: ``python race_worker.py CONSENSUS_URL KEY WORKER_ID ATTEMPTS``. Opens the consensus,
prints ``ready`` and waits for a line on stdin (so the workers start together), then ATTEMPTS
times reads the head and tries to write the next version; prints one line per won version:
``won SEQNO TAG``.
"""

import sys

from colmz.storage.base import VersionedData
from colmz.storage.url import open_consensus


def main() -> None:
    url, key, wid, attempts = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    cons = open_consensus(url)
    cons.head(key)  # connected
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(attempts):
        head = cons.head(key)
        expected = None if head is None else head.seqno
        seqno = 1 if expected is None else expected + 1
        if cons.compare_and_set(key, expected, VersionedData(seqno, f"{wid}:{i}".encode())):
            print(f"won {seqno} {wid}:{i}", flush=True)


if __name__ == "__main__":
    main()
