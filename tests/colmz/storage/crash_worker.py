"""A process that commits to a local store until it is killed (run by test_crash.py).

Usage: ``python crash_worker.py STORE_DIR``. Forever: write a part (1-3 MiB whose bytes are
a function of its name) under a fresh key, then commit a StateLog version naming it. Prints
``started`` once the loop runs. The test kills it with SIGKILL at a random moment.
"""

import hashlib
import sys

from colmz.storage.state import StateLog
from colmz.storage.url import open_location


def part_bytes(name: str, size: int) -> bytes:
    """The content a part named ``name`` must have (checked after the crash)."""
    seed = hashlib.sha256(name.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def main() -> None:
    loc = open_location(sys.argv[1])
    log = StateLog(loc.consensus, "meta", rollup_every=4)
    seqno, state = log.load()
    state = state or {"parts": []}
    i = 0
    print("started", flush=True)
    while True:
        name = f"parts/{seqno or 0}-{i}"
        size = 2**20 + (i * 7919) % (2 * 2**20)
        loc.blob.set(name, part_bytes(name, size))
        state = {"parts": state["parts"][-5:] + [[name, size]]}
        seqno = log.commit(seqno, state)
        i += 1


if __name__ == "__main__":
    main()
