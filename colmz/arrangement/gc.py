"""Garbage collection and leases of :class:`colmz.arrangement.Arrangement`.

Design
------
A part key embeds its creation time (``colmz.arrangement.parts``). :meth:`GarbageCollection.gc`
deletes parts under the arrangement's prefix that the committed state does not reference and
that are older than ``lease_seconds``; a commit refuses (:class:`LeaseExpired`) when a part it
is about to reference is older than half the lease. So a part an in-flight commit may still
reference is never collected, as long as no commit stalls for half a lease between its check
and its compare-and-set, and clocks agree to within the other half. Parts a successful commit
stops referencing are deleted right after it (best effort; gc catches the rest). A read that
finds a part missing reloads the state once and retries.

Invariants
----------
``gc`` refuses when its state cannot account for the parts, and never deletes a part recorded
at or above the version it read (``colmz.arrangement.identity``).
"""

from __future__ import annotations

from colmz.arrangement.errors import (
    CorruptMeta,
    IdentityMismatch,
    LeaseExpired,
    MetadataLost,
)
from colmz.arrangement.meta import (
    meta_from_dict,
)
from colmz.arrangement.parts import (
    key_created_ms,
    key_seqno,
)
from colmz.arrangement.runs import abort_marker_prefix

__all__ = ["GC_CLOCK_SLACK_MS", "GarbageCollection"]


#: How far before a store's creation a part may be dated and still be taken for the store's
#: own (a writer's clock behind the creator's) when ``gc`` checks for parts older than it.
GC_CLOCK_SLACK_MS = 60_000


class GarbageCollection:
    """Garbage collection and the lease check (module docstring); a base of
    :class:`colmz.arrangement.Arrangement`."""

    def _check_lease(self, new_keys) -> None:
        """Refuse to reference parts older than half the gc lease (gc may have taken them)."""
        now_ms = self.clock() * 1000
        for k in new_keys:
            ms = key_created_ms(k)
            if ms is not None and now_ms - ms > self.lease_seconds * 500:
                raise LeaseExpired(
                    f"part {k!r} was written {(now_ms - ms) / 1000:.1f} s ago, more than half the "
                    f"gc lease of {self.lease_seconds} s: gc may collect it, so it cannot be committed"
                )

    def _delete_keys(self, keys) -> None:
        for k in keys:
            try:
                self._store.delete(k)
                self._counters["parts_deleted"] += 1
            except Exception:  # noqa: BLE001 - best effort; gc collects what is left
                pass

    def gc(self, lease_seconds: float | None = None) -> list[str]:
        """Delete parts under this arrangement's prefix that the committed state does not
        reference and that are older than the lease; return the deleted keys.

        Refuses, deleting nothing, when the committed state cannot account for the parts
        (``colmz.arrangement.identity``): :class:`IdentityMismatch` when the blob's identity
        or the record's id is not this handle's store, :class:`MetadataLost` when the
        record is gone while parts remain, when unreferenced parts were written before the
        store was created (they are not this state's garbage), or when the state never held
        a batch while an unsealed or trace part past the lease is there; and
        :class:`MetadataRolledBack` when a part records a newer version than the record's
        (or the record's seqno went down under this handle). A part recording the version
        gc read, or a newer one, is never deleted (it may be a commit's in flight).
        """
        from colmz.arrangement.identity import check_not_rolled_back, read_identity, state_identity

        lease = self.lease_seconds if lease_seconds is None else float(lease_seconds)
        listed = self._store.list_keys(self.prefix)
        created_ms = None
        if self._log is not None:
            ident = self._identity
            if ident is not None:
                found = read_identity(self._store, ident.name)
                if found != ident:
                    raise IdentityMismatch(
                        f"gc of store {self._url!r}: its blob's identity is now "
                        f"{found.id if found else None}, not {ident.id} which this handle "
                        "opened; nothing was deleted"
                    )
                created_ms = ident.created_ms
            seqno, state = self._log.load()
            if state is None:
                if listed:
                    raise MetadataLost(
                        f"gc of store {self._url!r}: its consensus record {self._log.key!r} is "
                        f"gone while {len(listed)} part(s) remain under {self.prefix!r}, e.g. "
                        f"{listed[0]!r}; nothing was deleted"
                    )
                return []
            sid = state_identity(state)
            if ident is not None and sid is not None and sid != ident.id:
                raise IdentityMismatch(
                    f"gc of store {self._url!r}: the consensus record {self._log.key!r} belongs "
                    f"to store {sid}, not {ident.id}; nothing was deleted"
                )
            if not isinstance(state, dict) or "meta" not in state:
                raise CorruptMeta(f"gc of store {self._url!r}: the state at seqno {seqno} is not "
                                  "an arrangement's; nothing was deleted")
            # The listing was taken before this read: a part recording a newer seqno
            # than the record's proves the record was rolled back (identity module).
            self._machine.check_not_behind(seqno, state)
            check_not_rolled_back(listed, seqno, state, lambda: seqno, where=str(self._url),
                                  consensus=repr(self._log.consensus), key=self._log.key)
            _, _, unsealed, trace = meta_from_dict(state["meta"])
            referenced = {k for b in (*unsealed, *trace) for k in b.keys}
            empty = not unsealed and not trace
            gc_seqno = seqno
        else:
            referenced = set(self.referenced_keys())
            empty = not self._unsealed and not self._trace
            gc_seqno = None
        now_ms = self.clock() * 1000
        if empty and listed:
            # A state that never held a batch, over parts an arrangement writes only once
            # its state holds them (an unsealed or trace part, past the lease): the state
            # was made over another's data (a lost record recreated empty, a core handle on
            # a used store). Runs are left to the lease: a failed job's are garbage.
            from colmz.arrangement.parts import part_kind

            old = [k for k in listed if now_ms - (key_created_ms(k) or now_ms) > lease * 1000]
            looking = next((k for k in old if part_kind(self._store, k) in ("unsealed", "trace")), None)
            if looking is not None:
                raise MetadataLost(
                    f"gc of {self._url or self._store!r}: the state holds no batch, but "
                    f"{looking!r} under {self.prefix!r} is a committed arrangement part older "
                    "than the lease: this state cannot account for it; nothing was deleted"
                )
        if created_ms is not None:
            # A part written before the store existed is no garbage of this state's: the
            # state was created over data it cannot account for (GC_CLOCK_SLACK_MS allows
            # for the clocks of the store's own writers).
            older = [k for k in listed if k not in referenced
                     and (key_created_ms(k) or created_ms) < created_ms - GC_CLOCK_SLACK_MS]
            if older:
                raise MetadataLost(
                    f"gc of store {self._url!r}: {len(older)} unreferenced part(s) under "
                    f"{self.prefix!r} were written before the store was created, e.g. "
                    f"{older[0]!r}: the state cannot account for them; nothing was deleted"
                )
        gone = []
        for k in listed:
            ms = key_created_ms(k)
            if k in referenced or ms is None or now_ms - ms <= lease * 1000:
                continue
            s = key_seqno(k)
            if s is not None and gc_seqno is not None and s >= gc_seqno:
                # written against the version gc read (a commit may be in flight) or a
                # newer one: not this state's garbage, whatever its age
                continue
            self._store.delete(k)
            gone.append(k)
        # Abort markers of discarded jobs (colmz.arrangement.runs.discard_owned) matter only
        # while a task of the job may still be writing: past the lease gc takes its parts anyway.
        for k in self._store.list_keys(abort_marker_prefix(self.prefix)):
            value = self._store.get(k)
            try:
                ms = int(value) if value is not None else None
            except ValueError:
                ms = None
            if ms is not None and now_ms - ms > lease * 1000:
                self._store.delete(k)
                gone.append(k)
        return gone
