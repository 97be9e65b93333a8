"""The arrangement's one command loop: every durable change is a command applied here.

Layer
-----
The *machine* layer of ``colmz.arrangement`` (``docs/arrangement.md``), after
``src/persist-client/src/internal/machine.rs`` (``Machine::apply_unbatched_idempotent_cmd``).
It sits between the handle (:mod:`colmz.arrangement.handle`, which builds commands) and the
storage (``colmz.storage.state.StateLog``, which does one compare-and-set). The machine owns
the state: the handle reads it from :attr:`Machine.state`. It never writes nor deletes a
part: it tells the handle which parts are garbage.

Design
------
A :class:`Machine` holds the state log (None for an in-memory core), the state the handle
works on (:attr:`~Machine.state`), the state last loaded or committed
(:attr:`~Machine.committed`), its version (:attr:`~Machine.seqno`) and what its state
document names besides the state: the store's identity and the schema a read took from a
part. It encodes and decodes that document itself
(:func:`colmz.arrangement.state.encode_state`, :func:`~colmz.arrangement.state.decode_state`).

A *command* is a pure function of an :class:`~colmz.arrangement.state.ArrangementState`: it
returns the new state, :data:`STALE` when it no longer applies (a compaction response whose
inputs left the trace; nothing to commit), or raises (a check failed:
:class:`~colmz.arrangement.errors.SealMismatch`, ``TimeBeforeSeal``, ...). Every part it
references is written before it is applied: the command only names them (``written``).
:meth:`Machine.apply` runs one:

1. ``cmd(state)`` on the machine's state -- the state last loaded or committed;
2. the compare-and-set of the new state against the version read (``StateLog.commit``);
3. on success the new state is the machine's.

When the compare-and-set is lost to another writer (:class:`CommitConflict`), the state is
reloaded from consensus (:meth:`Machine.refresh`) and the *same* command applied again to the
newer state -- its own checks run again there, so a conditional command (``expect=``) refuses
once another writer moved what it expected, and an unconditional one lands once. The parts
written for it are kept across the retries: a long merge is never thrown away because a
small write landed meanwhile. At most :data:`ATTEMPTS` compare-and-sets are tried; then the
last :class:`CommitConflict` is the outcome.

The machine touches no part. :meth:`Machine.apply` returns an :class:`Outcome`: whether the
command landed, its error, and the parts that are now garbage -- the ones the new state no
longer names, or the ones written for a command that certainly did not land. The handle,
which checked the lease of the parts before handing the command over
(``colmz.arrangement.gc``), deletes them and raises the error (persist's
``apply_unbatched_idempotent_cmd`` likewise returns its result and the routine maintenance
its caller runs).

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
2. The parts written for a command are garbage when it certainly did not land (any error
   before the compare-and-set was sent, a lost compare-and-set, a ``Determinate`` failure).
   When the outcome is unknown (``Indeterminate``: ``StateLog`` could not tell by re-reading
   the head whether the commit landed) they are not: ``gc`` decides, respecting the lease.
3. A part the committed state, the machine's state or ``keep`` names is never garbage.

This is the only compare-and-set retry of the arrangement family and its callers (the
catalog's ``ArrangementCollection``, the streaming sink, the batch sink): they commit
through one durable call and get its result or its exception.

**Several machines, one step.** :meth:`Machine.prepare` runs a command on the committed
state and builds the version committing it (``StateLog.prepare``) without committing or
changing anything; ``colmz.storage.state.commit_together`` commits the versions of several
machines on one consensus in one ``compare_and_set_many`` -- all or none -- and each
machine then takes its new state (:meth:`Machine.landed`). The state stays the machine's
own and changes only by a landed compare-and-set; a step that did not land (lost, failed)
leaves every machine as it was, and its caller applies the commands one by one
(:meth:`Machine.apply`, with its retries) -- the step itself is never retried against a
newer head.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from colmz.arrangement.errors import CorruptMeta, MetadataRolledBack
from colmz.arrangement.state import ArrangementState, decode_state, encode_state
from colmz.storage.base import Determinate
from colmz.storage.state import CommitConflict

__all__ = ["ATTEMPTS", "STALE", "Command", "Machine", "Outcome", "PreparedCommand"]

#: Compare-and-sets tried per command before its :class:`CommitConflict` is raised: enough
#: for a writer racing a few others (each loss means another writer's commit landed), small
#: enough that a command never spins behind a writer that commits in a tight loop.
ATTEMPTS = 4


class _Stale:
    def __repr__(self) -> str:
        return "STALE"


#: What a command returns when it no longer applies to the state (nothing is committed).
STALE: Any = _Stale()

#: A command: the state it applies to -> the new state, or :data:`STALE`.
Command = Callable[[ArrangementState], Any]


@dataclass(frozen=True)
class Outcome:
    """What :meth:`Machine.apply` did: ``applied`` (the new state is the machine's),
    ``garbage`` (parts to delete now), ``conflicts`` (compare-and-sets lost) and ``error``
    (what the command or the commit raised; None when it landed or was stale)."""

    applied: bool
    garbage: frozenset[str] = frozenset()
    conflicts: int = 0
    error: BaseException | None = None

    def result(self) -> bool:
        """``applied``, or raise ``error``."""
        if self.error is not None:
            raise self.error
        return self.applied


@dataclass(frozen=True)
class PreparedCommand:
    """A command run on a machine's committed state, not committed (:meth:`Machine.prepare`):
    the new ``state`` and the log ``version`` (``colmz.storage.state.Prepared``) that
    commits it."""

    state: ArrangementState
    version: Any


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

    Attributes
    ----------
    identity : colmz.arrangement.identity.StoreIdentity or None
        The store's identity: committed in every document, checked in every one loaded.
    home : str or None
        Where the blob of this store is (``identity.check_not_a_copy``).
    where : str or None
        The store's URL, for messages.
    part_schema : tuple or None
        The schema a read took from a part while the state names none (a read changes no
        state; the next commit records it).

    Examples
    --------
    Every arrangement handle owns one (``Arrangement.seal`` and the other durable calls hand it
    their commands); here a bare seal, as a command:

    >>> import colmz
    >>> a = colmz.Arrangement.open("mem://machine-doc")
    >>> a._machine.apply(lambda state: state.update_seal(3)).result()
    True
    >>> colmz.Arrangement.open("mem://machine-doc").get_seal()
    3
    """

    def __init__(self, log, state: ArrangementState, seqno: int | None = None):
        self.log = log
        self.state = state
        self.committed = state
        self.seqno = seqno
        self.commits = 0
        self.identity = None
        self.home: str | None = None
        self.where: str | None = None
        self.part_schema = None

    @property
    def durable(self) -> bool:
        """Whether the state is committed to a consensus record."""
        return self.log is not None

    def encode(self, state: ArrangementState) -> dict:
        """The document committed for ``state``."""
        ident = None
        if self.identity is not None:
            ident = self.identity.state_doc()
            if self.home is not None:
                ident["blob"] = self.home  # where the blob committing it is (identity.check_not_a_copy)
        return encode_state(state, schema=self.part_schema, identity=ident)

    def decode(self, seqno: int, doc) -> ArrangementState:
        """The state of a document loaded at ``seqno``: not behind the version this machine
        read (:meth:`check_not_behind`), a colmz arrangement's, this store's, valid."""
        self.check_not_behind(seqno, doc)
        return decode_state(seqno, doc, store_id=None if self.identity is None else self.identity.id,
                            key=None if self.identity is None else self.identity.consensus_key)

    def check_not_behind(self, seqno: int, doc) -> None:
        """Refuse a record whose seqno went down under this machine: seqnos never decrease,
        so it was rolled back to an older copy (``colmz.arrangement.identity``)."""
        if self.seqno is not None and seqno < self.seqno:
            from colmz.arrangement.identity import seal_of_state

            raise MetadataRolledBack(
                f"store {self.where!r}: its consensus record {self.log.key!r} is at seqno "
                f"{seqno} (seal {seal_of_state(doc)}), behind seqno {self.seqno} this handle "
                "read or committed: the record was rolled back to an older copy (a consensus "
                "restored from a backup). Nothing was written; restore the newest copy of the "
                "consensus database"
            )

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
        self.loaded(seqno, self.decode(seqno, doc))

    def commit(self) -> int | None:
        """Compare-and-set :attr:`state` against the version read (the caller checked the
        lease of the parts it newly names)."""
        if self.log is None:
            return None
        self._commit(self.state)
        return self.seqno

    def _commit(self, state: ArrangementState) -> None:
        # the one compare-and-set of the arrangement's state (StateLog.commit)
        self.seqno = self.log.commit(self.seqno, self.encode(state))
        self.state = self.committed = state
        self.commits += 1

    def prepare(self, cmd: Command) -> PreparedCommand | Any:
        """``cmd`` run on the committed state and the version committing the state it
        returns, built and not committed (module docstring: several machines, one step);
        :data:`STALE` when the command no longer applies. Changes nothing; raises what the
        command raises, and ``ValueError`` for a machine with no record or with changes
        not committed yet (a step must not commit them behind their owner's back)."""
        if self.log is None:
            raise ValueError("prepare: the arrangement is not durable (no consensus record)")
        if self.state is not self.committed and self.state != self.committed:
            raise ValueError("prepare: the arrangement holds changes not committed yet; commit them first")
        state = cmd(self.committed)
        if state is STALE:
            return STALE
        return PreparedCommand(state, self.log.prepare(self.seqno, self.encode(state)))

    def landed(self, prepared: PreparedCommand) -> None:
        """Take the state of ``prepared`` once its version was committed."""
        self.seqno = self.log.landed(prepared.version)
        self.state = self.committed = prepared.state
        self.commits += 1

    def apply(self, cmd: Command, *, written: Iterable[str] = (), keep: Iterable[str] = (),
              attempts: int = ATTEMPTS) -> Outcome:
        """Apply ``cmd`` to the state and commit what it returns (module docstring).

        ``written`` are the parts written for the command; ``keep`` parts that are never
        garbage here, whatever happens (another record names them: a catalog's committed
        intent, applied again later); ``attempts`` bounds the compare-and-sets.
        """
        written = frozenset(written)
        keep = frozenset(keep)
        retry = self.state == self.committed
        conflicts = 0
        for attempt in range(attempts):
            before = self.state
            sent = False
            try:
                state = cmd(before)
                if state is STALE:
                    break
                if self.durable:
                    sent = True
                    self._commit(state)
                else:
                    self.state = state
            except CommitConflict as e:
                conflicts += 1
                if not retry or attempt == attempts - 1:
                    return Outcome(False, self._unnamed(written, keep), conflicts, e)
                try:
                    self.refresh()
                except BaseException as e2:  # the compare-and-set was lost all the same
                    return Outcome(False, self._unnamed(written, keep), conflicts, e2)
                continue
            except BaseException as e:
                # A compare-and-set that was sent and failed indeterminately may have landed
                # (StateLog re-read the head and could not tell): its parts are gc's.
                landed = sent and not isinstance(e, Determinate)
                return Outcome(False, frozenset() if landed else self._unnamed(written, keep),
                               conflicts, e)
            return Outcome(True, before.referenced_keys() - state.referenced_keys() - keep, conflicts)
        return Outcome(False, self._unnamed(written, keep), conflicts)

    def _unnamed(self, keys: frozenset[str], keep: frozenset[str]) -> frozenset[str]:
        # parts no state the machine knows names (the committed one included)
        return keys - self.state.referenced_keys() - self.committed.referenced_keys() - keep
