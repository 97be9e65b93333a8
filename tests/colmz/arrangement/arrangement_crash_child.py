"""Child process of the arrangement crash tests (run by ``test_arrangement_durability.py``).

    python arrangement_crash_child.py URL SEED N_OPS START JOURNAL MODE N

Opens the arrangement at ``URL`` and runs operations ``START..N_OPS-1`` of
``arrangement_workload.workload(SEED, N_OPS)``, appending ``i`` to ``JOURNAL`` (fsynced) after
operation ``i`` returned -- the parent's record of what was acknowledged. ``MODE``:

* ``call-before`` / ``call-after``: SIGKILL itself at the ``N``-th storage call (every method
  of the local blob and the SQLite consensus counts), before or after that call took effect --
  a kill *inside* an operation, between its blob writes and its metadata commit;
* ``run``: no self-kill (the parent kills it after a random delay).

The test starts it as :func:`run` in a process forked from a ``multiprocessing`` fork server
that imported colmz once, not as a new interpreter: same process boundary and SIGKILL, without
each child's second of imports.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import arrangement_workload as wl  # noqa: E402

import colmz  # noqa: E402
from colmz.arrangement import part_writer  # noqa: E402
from colmz.storage.local import LocalBlob  # noqa: E402
from colmz.storage.sqlite import SqliteConsensus  # noqa: E402

CALLS = 0


def arm(mode: str, n: int) -> None:
    def wrap(cls, name):
        real = getattr(cls, name)

        def counted(self, *args, **kwargs):
            global CALLS
            CALLS += 1
            here = n == CALLS
            if here and mode == "call-before":
                os.kill(os.getpid(), signal.SIGKILL)
            out = real(self, *args, **kwargs)
            if here and mode == "call-after":
                os.kill(os.getpid(), signal.SIGKILL)
            return out

        setattr(cls, name, counted)

    for name in ("get", "open_input", "set", "delete", "list_keys"):
        wrap(LocalBlob, name)
    for name in ("head", "compare_and_set", "scan", "truncate"):
        wrap(SqliteConsensus, name)


def main(argv: list[str] | None = None) -> None:
    url, seed, n_ops, start, journal, mode, n = sys.argv[1:8] if argv is None else argv
    # Every write of 1 KiB or more is cut into parts encoded side by side (the production
    # bound is 16 MiB; the workload's writes are small), so kills also land between and
    # inside the concurrent part writes of one batch. Set here, in the child only.
    part_writer.PARALLEL_WRITE_BYTES = 1 << 10
    seed, n_ops, start, n = int(seed), int(n_ops), int(start), int(n)
    ops = wl.workload(seed, n_ops)
    fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(fd, b"start\n")
    os.fsync(fd)
    if mode != "run":
        arm(mode, n)
    arr = colmz.Arrangement.open(url, schema=wl.SCHEMA)
    for i in range(start, n_ops):
        wl.apply(arr, ops[i])
        os.write(fd, f"{i}\n".encode())
        os.fsync(fd)
    os.write(fd, f"done {CALLS}\n".encode())
    os.fsync(fd)


def run(argv: list[str], err_path: str) -> None:
    """:func:`main` in a process forked by the test's fork server (``multiprocessing``): on an
    error its traceback goes to ``err_path`` and the process exits with 1."""
    try:
        main(argv)
    except BaseException:
        with open(err_path, "w") as f:
            f.write(traceback.format_exc())
        os._exit(1)


if __name__ == "__main__":
    main()
