"""The arrangement's one command loop: every durable change is a command applied here.

Layer
-----
The *machine* layer of ``colmz.arrangement`` (``docs/arrangement.md``), after
``src/persist-client/src/internal/machine.rs`` (``Machine::apply_unbatched_idempotent_cmd``).
It sits between the handle (:mod:`colmz.arrangement.handle`, which builds commands) and the
storage (``colmz.storage.state.StateLog``, which does one compare-and-set). The machine owns
the state: the handle reads it from :attr:`Machine.state`. It never writes a part itself; it
deletes the parts of a command that certainly did not land.

Design
------
A :class:`Machine` holds the state log (None for an in-memory core), the state the handle
works on (:attr:`~Machine.state`), the state last loaded or committed
(:attr:`~Machine.committed`) and its version (:attr:`~Machine.seqno`). A *command* is a pure
function of an :class:`~colmz.arrangement.state.ArrangementState`: it returns ``(new state,
result)``, returns :data:`STALE` when it no longer applies (a compaction response whose inputs
left the trace; nothing to commit), or raises (a check failed:
:class:`~colmz.arrangement.errors.SealMismatch`, ``TimeBeforeSeal``, ...). The parts a command
references are written before it is applied, or by the command itself (an append's parts).
:meth:`Machine.apply` runs one:

1. ``cmd(state)`` on the machine's state -- the state last loaded or committed;
2. the lease check of every part the new state newly references
   (:class:`~colmz.arrangement.errors.LeaseExpired`);
3. the compare-and-set of the new state against the version read (``StateLog.commit``);
4. on success the new state is the machine's, and the parts it no longer references are
   deleted (best effort: ``gc`` collects the rest).

When the compare-and-set is lost to another writer (:class:`CommitConflict`), the state is
reloaded from consensus (:meth:`Machine.refresh`) and the *same* command applied again to the
newer state -- its own checks run again there, so a conditional command (``expect=``) refuses
once another writer moved what it expected, and an unconditional one lands once. Parts a
command wrote before it was applied (a drain's or a compaction's output, a run of an append)
are kept across the retries: a long merge is never thrown away because a small write landed
meanwhile. At most :data:`ATTEMPTS` compare-and-sets are tried; then the last
:class:`CommitConflict` is raised.

The handle's core operations (``unsealed_append`` and the others without
:meth:`~colmz.arrangement.Arrangement.commit`) change :attr:`Machine.state` in memory only.
While it differs from :attr:`Machine.committed` a lost compare-and-set is not retried:
reloading would drop those changes, so the conflict is the caller's to resolve
(``refresh()`` and redo them).

Invariants
----------
1. A command that raises, or returns :data:`STALE`, leaves :attr:`Machine.state` as it was
   before the attempt that raised -- the state last read from consensus when a lost
   compare-and-set refreshed it -- and commits nothing (a command is pure: there is nothing
   to put back).
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
from typing import Any

from colmz.arrangement.errors import CorruptMeta
from colmz.arrangement.state import ArrangementState
from colmz.storage.base import Determinate
from colmz.storage.state import CommitConflict

__all__ = ["ATTEMPTS", "STALE", "Command", "Machine"]

#: Compare-and-sets tried per command before its :class:`CommitConflict` is raised: enough
#: for a writer racing a few others (each loss means another writer's commit landed), small
#: enough that a command never spins behind a writer that commits in a tight loop.
ATTEMPTS = 4


class _Stale:
    def __repr__(self) -> str:
        return "STALE"


#: What a command returns when it no longer applies to the state (nothing is committed).
STALE: Any = _Stale()

#: A command: the state it applies to -> ``(new state, result)``, or :data:`STALE`.
Command = Callable[[ArrangementState], Any]


class Machine:
    """Owns one arrangement's state and applies commands to it (module docstring).

    Parameters
    ----------
    log : colmz.storage.state.StateLog or None
        The consensus record (None: an in-memory core, nothing is committed).
    state : ArrangementState
        The state loaded (or the initial state of a new core).
    seqno : int or None
        The version ``state`` was loaded at (None: not loaded from a record).
    encode : callable
        ``encode(state) -> dict``, the state document committed.
    decode : callable
        ``decode(seqno, doc) -> ArrangementState``, a loaded document checked and read.
    check_lease : callable
        ``check_lease(keys)`` refuses (``LeaseExpired``) parts gc may already have collected.
    delete_parts : callable
        ``delete_parts(keys)`` deletes parts, best effort.

    Examples
    --------
    Every arrangement handle owns one (``Arrangement.seal`` and the other durable calls hand it
    their commands); here a bare seal, as a command:

    >>> import colmz
    >>> a = colmz.Arrangement.open("mem://machine-doc")
    >>> a._machine.apply(lambda state: (state.update_seal(3), None))
    >>> colmz.Arrangement.open("mem://machine-doc").get_seal()
    3
    """

    def __init__(self, log, state: ArrangementState, seqno: int | None = None, *,
                 encode: Callable[[ArrangementState], dict],
                 decode: Callable[[int, Any], ArrangementState],
                 check_lease: Callable[[Iterable[str]], None],
                 delete_parts: Callable[[Iterable[str]], None]):
        self.log = log
        self.state = state
        self.committed = state
        self.seqno = seqno
        self.commits = 0
        self._encode = encode
        self._decode = decode
        self._check_lease = check_lease
        self._delete_parts = delete_parts

    @property
    def durable(self) -> bool:
        """Whether the state is committed to a consensus record."""
        return self.log is not None

    def loaded(self, seqno: int | None, state: ArrangementState) -> None:
        """Take ``state``, read at version ``seqno``, as both the state and the committed one."""
        self.state = self.committed = state
        self.seqno = seqno

    def refresh(self) -> None:
        """Reload the committed state from the record (discarding in-memory changes)."""
        if self.log is None:
            return
        seqno, doc = self.log.load()
        if doc is None:
            raise CorruptMeta("the arrangement's consensus record is gone")
        self.loaded(seqno, self._decode(seqno, doc))

    def commit(self) -> int | None:
        """Compare-and-set :attr:`state` against the version read (the lease check first)."""
        if self.log is None:
            return None
        self._commit(self.state)
        return self.seqno

    def _commit(self, state: ArrangementState) -> None:
        # the one compare-and-set of the arrangement's state (StateLog.commit)
        self._check_lease(state.referenced_keys() - self.committed.referenced_keys())
        self.seqno = self.log.commit(self.seqno, self._encode(state))
        self.state = self.committed = state
        self.commits += 1

    def apply(self, cmd: Command, *, written: Iterable[str] = (), keep: Iterable[str] = (),
              attempts: int = ATTEMPTS, on_conflict: Callable[[], None] | None = None) -> Any:
        """Apply ``cmd`` to the state and commit what it returns; return its result
        (:data:`STALE`: it no longer applied, nothing committed).

        ``written`` are parts written for the command before it was applied; ``keep`` parts
        that are never deleted here, whatever happens (another record names them: a
        catalog's committed intent, applied again later); ``attempts`` bounds the
        compare-and-sets; ``on_conflict()`` is called after each lost one that is
        retried.
        """
        written = frozenset(written)
        keep = frozenset(keep)
        retry = self.state == self.committed
        for attempt in range(attempts):
            before = self.state
            before_keys = before.referenced_keys()
            new_keys: frozenset[str] = frozenset()
            sent = False
            try:
                out = cmd(before)
                if out is STALE:
                    break
                state, result = out
                new_keys = state.referenced_keys() - before_keys
                # also without a consensus store: the parts the commit newly references must
                # still be leased (a part the committed state names is safe from gc: a drain
                # handing an old unsealed batch's parts to the trace is no new reference)
                # (for an in-memory core, the state before the command is the one gc sees)
                safe = self.committed.referenced_keys() if self.durable else before_keys
                self._check_lease((new_keys | written) - safe)
                if self.durable:
                    sent = True
                    self._commit(state)
                else:
                    self.state = state
            except CommitConflict:
                if not retry or attempt == attempts - 1:
                    self._drop(written | new_keys, keep)
                    raise
                self._drop(new_keys - written, keep)  # parts the command itself wrote are rewritten
                if on_conflict is not None:
                    on_conflict()
                self.refresh()
                continue
            except BaseException as e:
                # A compare-and-set that was sent and failed indeterminately may have landed
                # (StateLog re-read the head and could not tell): its parts are gc's.
                if not sent or isinstance(e, Determinate):
                    self._drop(new_keys | written, keep)
                raise
            self._delete_parts(before_keys - state.referenced_keys())
            return result
        self._drop(written, keep)
        return STALE

    def _drop(self, keys, keep: frozenset[str]) -> None:
        # parts no state the machine knows names (the committed one included)
        gone = set(keys) - self.state.referenced_keys() - self.committed.referenced_keys() - keep
        if gone:
            with contextlib.suppress(Exception):
                self._delete_parts(gone)
