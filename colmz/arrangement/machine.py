"""The arrangement's one command loop: every durable change is a command applied here.

Layer
-----
The *machine* layer of ``colmz.arrangement`` (``docs/arrangement.md``), after
``src/persist-client/src/internal/machine.rs`` (``Machine::apply_unbatched_cmd``). It sits
between the handle (:mod:`colmz.arrangement.handle`, which builds commands) and the storage
(``colmz.storage.state.StateLog``, which does one compare-and-set). It touches the handle's
in-memory state only through the hooks named below and never writes a part itself; it
deletes the parts of a command that certainly did not land.

Design
------
A *command* is a function of the handle's current in-memory state: it changes that state
(the upstream core operations) and returns a result, returns :data:`STALE` when it no
longer applies (a compaction response whose inputs left the trace), or raises (a check
failed: :class:`~colmz.arrangement.errors.SealMismatch`, ``TimeBeforeSeal``, ...).
:meth:`Machine.apply` runs one:

1. keep the state (``capture()``) and the parts it references;
2. ``cmd()`` on the handle's state -- the state the handle last loaded or committed;
3. the lease check of every part the new state newly references
   (:class:`~colmz.arrangement.errors.LeaseExpired`);
4. the compare-and-set of the new state against the version read (``StateLog.commit``);
5. on success the new state is the handle's, and the parts it no longer references are
   deleted (best effort: ``gc`` collects the rest).

When the compare-and-set is lost to another writer (:class:`CommitConflict`), the state is
put back, reloaded from consensus (``refresh()``) and the *same* command applied again to
the newer state -- its own checks run again there, so a conditional command (``expect=``)
refuses once another writer moved what it expected, and an unconditional one lands once.
Parts a command wrote before it was applied (a drain's or a compaction's output, a run of
an append) are kept across the retries: a long merge is never thrown away because a small
write landed meanwhile. At most :data:`ATTEMPTS` compare-and-sets are tried; then the last
:class:`CommitConflict` is raised.

A handle whose in-memory state holds changes no commit made (core operations without
:meth:`~colmz.arrangement.Arrangement.commit`) is not retried: reloading would drop those
changes, so the conflict is the caller's to resolve (``refresh()`` and redo them).

Invariants
----------
1. A command that raises, or returns :data:`STALE`, leaves the handle's in-memory state as
   it was before the attempt that raised -- the state last read from consensus when a lost
   compare-and-set refreshed it -- and commits nothing.
2. The parts a command wrote (``written``) and the parts its state newly references are
   deleted when it certainly did not land (any error before the compare-and-set was sent, a
   lost compare-and-set, a ``Determinate`` failure). When the outcome is unknown
   (``Indeterminate``: ``StateLog`` could not tell by re-reading the head whether the commit
   landed) they are left for ``gc``, which respects the lease.
3. A part the committed state names is never deleted here.

This is the only compare-and-set retry of the arrangement family and its callers (the
catalog's ``ArrangementCollection``, the streaming sink, the batch sink): they commit
through one durable call and get its result or its exception.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from colmz.storage.base import Determinate
from colmz.storage.state import CommitConflict

__all__ = ["ATTEMPTS", "STALE", "Machine", "MachineTarget"]

#: Compare-and-sets tried per command before its :class:`CommitConflict` is raised: enough
#: for a writer racing a few others (each loss means another writer's commit landed), small
#: enough that a command never spins behind a writer that commits in a tight loop.
ATTEMPTS = 4


class _Stale:
    def __repr__(self) -> str:
        return "STALE"


#: What a command returns when it no longer applies to the state (nothing is committed).
STALE: Any = _Stale()


class MachineTarget(Protocol):
    """What the machine needs of the handle whose state it commits."""

    durable: bool

    def capture(self) -> Any:
        """The in-memory state, to put back with :meth:`reset`."""

    def reset(self, saved: Any) -> None:
        """Put back a state :meth:`capture` returned."""

    def dirty(self) -> bool:
        """Whether the in-memory state differs from the state last loaded or committed."""

    def referenced_keys(self) -> frozenset[str]:
        """The parts the in-memory state names."""

    def committed_keys(self) -> frozenset[str]:
        """The parts the state last loaded or committed names."""

    def check_lease(self, keys: Iterable[str]) -> None:
        """Refuse (``LeaseExpired``) parts gc may already have collected."""

    def commit_state(self) -> None:
        """Compare-and-set the in-memory state against the version read."""

    def refresh(self) -> None:
        """Reload the committed state."""

    def delete_parts(self, keys: Iterable[str]) -> None:
        """Delete parts, best effort."""


class Machine:
    """Applies commands to one handle's state (module docstring).

    Parameters
    ----------
    target : MachineTarget
        The handle (``colmz.arrangement.Arrangement``).

    Examples
    --------
    Every arrangement handle owns one (``Arrangement.seal`` and the other durable calls hand it
    their commands); here a bare core change, as a command:

    >>> import colmz
    >>> a = colmz.Arrangement.open("mem://machine-doc")
    >>> a._machine.apply(lambda: a.update_seal(3))
    >>> colmz.Arrangement.open("mem://machine-doc").get_seal()
    3
    """

    def __init__(self, target: MachineTarget):
        self.target = target

    def apply(self, cmd: Callable[[], Any], *, written: Iterable[str] = (), keep: Iterable[str] = (),
              attempts: int = ATTEMPTS, on_conflict: Callable[[], None] | None = None) -> Any:
        """Apply ``cmd`` and commit its state; return what it returned (:data:`STALE`: it no
        longer applied, nothing committed).

        ``written`` are parts written for the command before it was applied; ``keep`` parts
        that are never deleted here, whatever happens (another record names them: a
        catalog's committed intent, applied again later); ``attempts`` bounds the
        compare-and-sets; ``on_conflict()`` is called after each lost one that is
        retried.
        """
        t = self.target
        written = frozenset(written)
        keep = frozenset(keep)
        retry = not t.dirty()
        for attempt in range(attempts):
            saved = t.capture()
            before = t.referenced_keys()
            sent = False
            try:
                out = cmd()
                if out is STALE:
                    t.reset(saved)
                    break
                # also without a consensus store: the parts the commit newly references must
                # still be leased (a part the committed state names is safe from gc: a drain
                # handing an old unsealed batch's parts to the trace is no new reference)
                # (for an in-memory core, the state before the command is the one gc sees)
                safe = t.committed_keys() if t.durable else before
                t.check_lease(((t.referenced_keys() - before) | written) - safe)
                if t.durable:
                    sent = True
                    t.commit_state()
            except CommitConflict:
                new = t.referenced_keys() - before
                t.reset(saved)
                if not retry or attempt == attempts - 1:
                    self._drop(written | new, keep)
                    raise
                self._drop(new - written, keep)  # parts the command itself wrote are rewritten
                if on_conflict is not None:
                    on_conflict()
                t.refresh()
                continue
            except BaseException as e:
                new = (t.referenced_keys() - before) | written
                t.reset(saved)
                # A compare-and-set that was sent and failed indeterminately may have landed
                # (StateLog re-read the head and could not tell): its parts are gc's.
                if not sent or isinstance(e, Determinate):
                    self._drop(new, keep)
                raise
            t.delete_parts(before - t.referenced_keys())
            return out
        self._drop(written, keep)
        return STALE

    def _drop(self, keys, keep: frozenset[str]) -> None:
        # parts no state this handle knows names (the committed one included)
        t = self.target
        gone = set(keys) - t.referenced_keys() - t.committed_keys() - keep
        if gone:
            with contextlib.suppress(Exception):
                t.delete_parts(gone)
