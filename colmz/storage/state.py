"""A versioned JSON state kept in one consensus record as diffs with periodic rollups.

Design
------
A durable structure's metadata (which parts, which frontiers) is a small JSON object that
changes a little per commit: one batch appended, a seal advanced. Rewriting the whole object
per commit makes the bytes written grow with the number of commits times the state size
(quadratic over a run, the trouble of persist's first version: ``src/persist/src/indexed``
rewrote its META blob on every change). :class:`StateLog` instead writes each version of the
state as the *diff* from the previous version, and every ``rollup_every`` versions a full
copy (a *rollup*), after which the versions below the rollup are truncated. A reader scans
the live versions, starts from the newest rollup and applies the diffs after it.

The diff is generic, per field of the state:

* a field whose value did not change is omitted;
* a field that is a list before and after is *spliced*: the common prefix and suffix are kept
  and only the middle is replaced (appending one batch meta to a list of a thousand writes
  one element, not a thousand);
* a field that is a dict (with str keys) before and after is diffed recursively by the same
  rules, so nesting the metadata (``{"schema": ..., "meta": {"seal": ..., "batches": [...]}}``)
  keeps commits as small as a flat layout;
* any other change replaces the field's value; a removed field is listed as deleted.

Values are compared by their canonical JSON encoding (sorted keys, no spaces), so ``1``,
``1.0`` and ``True`` are different values, exactly as a reader will see them.

Each version is one JSON document::

    {"format": 1, "id": "<commit id>", "ms": <wall-clock ms>, "rollup": {...state...}}
    {"format": 1, "id": "<commit id>", "ms": <wall-clock ms>,
     "diff": {"set": {field: value}, "splice": {field: [start, stop, [items]]},
              "sub": {field: {...a diff of that dict...}}, "del": [field]}}

(empty members of a diff are omitted).

The commit id (a fresh UUID per commit) makes a commit recognisable after an indeterminate
failure; the wall-clock time lets a garbage collector reason about leases.

Invariants
----------
1. The oldest live version of a record is a rollup (the first version is a rollup, and
   versions are only truncated below a rollup).
2. Live versions have consecutive seqnos from the newest rollup to the head.
3. ``load()`` after ``commit(e, s)`` returned ``n`` (and no other commit since) gives
   ``(n, s)`` with ``s`` as it round-trips through JSON.
4. A commit that raises :class:`CommitConflict` wrote nothing. A commit that got an
   indeterminate error from the consensus is resolved by re-reading (the head carries the
   commit id), never by writing the same change twice.
5. :func:`commit_together` commits versions of several logs on one consensus as one
   ``compare_and_set_many``: all of them or none. Each is built exactly as
   :meth:`StateLog.commit` builds it (:meth:`StateLog.prepare`: diff or rollup, commit id),
   and a log takes it as its head only once the step landed (:meth:`StateLog.landed`).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from colmz.storage.base import (
    Consensus,
    Determinate,
    Indeterminate,
    StorageError,
    VersionedData,
    check_key,
)

__all__ = ["CommitConflict", "CorruptState", "Encoded", "Prepared", "StateLog", "StateStats", "apply_diff",
           "canonical_json", "commit_together"]

#: The version of the document layout written into every version (``"format"``).
FORMAT = 1


class CommitConflict(StorageError):
    """A compare-and-set lost: another writer committed the version this commit expected.

    Attributes ``key``, ``expected`` and ``found`` (the head seqno read back, or None when
    the record is missing or could not be read).
    """

    def __init__(self, key: str, expected: int | None, found: int | None) -> None:
        self.key = key
        self.expected = expected
        self.found = found
        super().__init__(
            f"commit to consensus key {key!r} expected head seqno {expected} but found "
            f"{found}: another writer committed first; nothing was written (reload and retry)"
        )


class CorruptState(StorageError):
    """A consensus record that is not a valid state log (bad JSON, missing rollup, gap)."""


@dataclass
class StateStats:
    """Counters of a :class:`StateLog` (bytes are the encoded versions handed to consensus)."""

    commits: int = 0
    rollups: int = 0
    bytes_committed: int = 0
    last_commit_bytes: int = 0
    cas_attempts: int = 0
    indeterminate_resolved: int = 0
    truncate_failures: int = 0


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


class _Node:
    """A value as cached between commits: its canonical JSON encoding, the encodings of its
    elements when it is a list, and the nodes of its fields when it is a dict with str keys.
    Strings are immutable, so a caller that mutates the dict it committed cannot corrupt
    the cache."""

    __slots__ = ("enc", "elems", "fields")

    def __init__(self, enc: str, elems: list[str] | None, fields: dict[str, _Node] | None) -> None:
        self.enc = enc
        self.elems = elems
        self.fields = fields


def _leaf(value: Any, path: str) -> str:
    try:
        return _dumps(value)
    except TypeError as e:
        raise TypeError(f"state field {path!r} is not JSON-able: {e}") from None
    except ValueError as e:
        raise ValueError(f"state field {path!r} holds a non-finite float: {e}") from None


def _encode(value: Any, path: str) -> _Node:
    if isinstance(value, Encoded):
        return value.node
    if isinstance(value, list):
        elems = [_leaf(x, f"{path}[{i}]") for i, x in enumerate(value)]
        return _Node("[" + ",".join(elems) + "]", elems, None)
    if isinstance(value, dict):
        for k in value:
            if not isinstance(k, str):
                raise TypeError(f"state field {path!r} has a non-str key {k!r}")
        fields = {k: _encode(v, f"{path}.{k}" if path else k) for k, v in value.items()}
        enc = "{" + ",".join(_dumps(k) + ":" + fields[k].enc for k in sorted(fields)) + "}"
        return _Node(enc, None, fields)
    return _Node(_leaf(value, path), None, None)


class Encoded:
    """A JSON value encoded once, to be committed as a field of a state (at any depth of
    dicts) without being encoded again: :meth:`StateLog.commit` takes its encoding as is,
    and a field whose encoding is the one the log committed last is compared by identity
    -- so a large field that rarely changes (a catalog's definitions) costs a commit
    nothing when it did not change. ``value`` is the value as a reader loads it (a copy
    through JSON, so tuples are lists): read it, never mutate it -- it is what the encoding
    says.

    >>> e = Encoded({"b": (1, 2), "a": "x"})
    >>> e.value, e.text
    ({'a': 'x', 'b': [1, 2]}, '{"a":"x","b":[1,2]}')
    >>> from colmz.storage import MemConsensus
    >>> log = StateLog(MemConsensus(), "k")
    >>> log.commit(None, {"defs": e, "n": 1}), log.commit(1, {"defs": e, "n": 2})
    (1, 2)
    >>> log.stats.last_commit_bytes < 100, StateLog(log.consensus, "k").load()
    (True, (2, {'defs': {'a': 'x', 'b': [1, 2]}, 'n': 2}))
    """

    __slots__ = ("node", "value")

    def __init__(self, value: Any, path: str = "value") -> None:
        self.node = _encode(value, path)
        self.value = json.loads(self.node.enc)

    @property
    def text(self) -> str:
        """The canonical JSON encoding (sorted keys, no spaces)."""
        return self.node.enc

    def __repr__(self) -> str:
        return f"Encoded({self.node.enc[:60]!r}{'...' if len(self.node.enc) > 60 else ''})"


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON (sorted keys, no spaces: ``json.dumps(value,
    sort_keys=True, separators=(",", ":"))``), each :class:`Encoded` in it taken as
    encoded.

    >>> canonical_json({"b": Encoded([1, 2]), "a": None})
    '{"a":null,"b":[1,2]}'
    """
    return _encode(value, "value").enc


def _encode_state(state: dict) -> _Node:
    if not isinstance(state, dict):
        raise TypeError(f"state must be a dict, got {type(state).__name__}")
    for field in state:
        if not isinstance(field, str):
            raise TypeError(f"state field names must be str, got {field!r}")
    return _encode(state, "")


def _diff_body(old: _Node, new: _Node) -> str:
    """The diff document turning dict node ``old`` into dict node ``new`` (empty members
    omitted, so an unchanged state diffs to ``{}``)."""
    sets: list[str] = []
    splices: list[str] = []
    subs: list[str] = []
    for field in sorted(new.fields):
        node = new.fields[field]
        prev = old.fields.get(field)
        if prev is not None and prev.enc == node.enc:
            continue
        if prev is not None and prev.elems is not None and node.elems is not None:
            a, b = prev.elems, node.elems
            n = min(len(a), len(b))
            p = 0
            while p < n and a[p] == b[p]:
                p += 1
            s = 0
            while s < n - p and a[len(a) - 1 - s] == b[len(b) - 1 - s]:
                s += 1
            middle = ",".join(b[p : len(b) - s])
            splices.append(f"{_dumps(field)}:[{p},{len(a) - s},[{middle}]]")
        elif prev is not None and prev.fields is not None and node.fields is not None:
            subs.append(_dumps(field) + ":" + _diff_body(prev, node))
        else:
            sets.append(_dumps(field) + ":" + node.enc)
    dels = [_dumps(f) for f in sorted(old.fields) if f not in new.fields]
    members = []
    if sets:
        members.append('"set":{' + ",".join(sets) + "}")
    if splices:
        members.append('"splice":{' + ",".join(splices) + "}")
    if subs:
        members.append('"sub":{' + ",".join(subs) + "}")
    if dels:
        members.append('"del":[' + ",".join(dels) + "]")
    return "{" + ",".join(members) + "}"


def apply_diff(state: dict, diff: dict) -> dict:
    """Apply one diff document (the ``"diff"`` member of a version) to ``state`` in place.

    >>> apply_diff({"a": [1, 2, 3], "b": 0, "c": 1, "d": {"x": 1, "y": [0]}},
    ...            {"set": {"b": 5}, "splice": {"a": [1, 2, [7, 8]]}, "del": ["c"],
    ...             "sub": {"d": {"splice": {"y": [1, 1, [1]]}}}})
    {'a': [1, 7, 8, 3], 'b': 5, 'd': {'x': 1, 'y': [0, 1]}}
    """
    for field, value in diff.get("set", {}).items():
        state[field] = value
    for field, (start, stop, items) in diff.get("splice", {}).items():
        current = state.get(field)
        if not isinstance(current, list) or not 0 <= start <= stop <= len(current):
            raise CorruptState(
                f"diff splices field {field!r} at [{start}, {stop}) but the state holds {current!r:.80}"
            )
        current[start:stop] = items
    for field, sub in diff.get("sub", {}).items():
        current = state.get(field)
        if not isinstance(current, dict):
            raise CorruptState(f"diff descends into field {field!r} but the state holds {current!r:.80}")
        apply_diff(current, sub)
    for field in diff.get("del", []):
        state.pop(field, None)
    return state


@dataclass
class _Cached:
    seqno: int
    encoded: _Node
    rollup_seqno: int


@dataclass(frozen=True)
class Prepared:
    """A version of a :class:`StateLog` built but not committed (:meth:`StateLog.prepare`):
    the version to compare-and-set after ``expected``, and what the log caches once it
    landed."""

    log: StateLog
    expected: int | None
    new: VersionedData
    commit_id: str
    encoded: _Node
    rollup: bool


class StateLog:
    """A dict state, versioned in one consensus record as diffs plus periodic rollups.

    Parameters
    ----------
    consensus : Consensus
        Where the versions live.
    key : str
        The consensus key of the record.
    rollup_every : int
        A full copy of the state is written when the head is this many versions past the
        last rollup (and for the first version); the versions below it are then truncated.
    max_attempts : int
        Compare-and-set attempts when an indeterminate failure is resolved as "did not land".

    Examples
    --------
    >>> from colmz.storage import MemConsensus
    >>> log = StateLog(MemConsensus(), "meta", rollup_every=4)
    >>> log.load()
    (None, None)
    >>> log.commit(None, {"seal": 0, "batches": []})
    1
    >>> log.commit(1, {"seal": 3, "batches": [{"key": "a"}]})
    2
    >>> StateLog(log.consensus, "meta").load()
    (2, {'batches': [{'key': 'a'}], 'seal': 3})
    >>> log.commit(1, {"seal": 4, "batches": []})
    Traceback (most recent call last):
    ...
    colmz.storage.state.CommitConflict: commit to consensus key 'meta' expected head seqno 1 but found 2: another writer committed first; nothing was written (reload and retry)
    """

    def __init__(
        self, consensus: Consensus, key: str, *, rollup_every: int = 32, max_attempts: int = 3
    ) -> None:
        if not isinstance(rollup_every, int) or isinstance(rollup_every, bool) or rollup_every < 1:
            raise ValueError(f"rollup_every must be an int >= 1, got {rollup_every!r}")
        if not isinstance(max_attempts, int) or isinstance(max_attempts, bool) or max_attempts < 1:
            raise ValueError(f"max_attempts must be an int >= 1, got {max_attempts!r}")
        self.consensus = consensus
        self.key = check_key(key)
        self.rollup_every = rollup_every
        self.max_attempts = max_attempts
        self.stats = StateStats()
        self._cache: _Cached | None = None
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        head = None if self._cache is None else self._cache.seqno
        return f"StateLog({self.key!r}, cached head {head}, rollup_every={self.rollup_every})"

    # -- reading ---------------------------------------------------------------------------

    def _parse(self, version: VersionedData) -> dict:
        try:
            doc = json.loads(bytes(version.data))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CorruptState(
                f"consensus key {self.key!r} version {version.seqno} is not JSON: {e}"
            ) from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or (
            not isinstance(doc.get("rollup"), dict) and not isinstance(doc.get("diff"), dict)
        ):
            raise CorruptState(
                f"consensus key {self.key!r} version {version.seqno} is not a state-log "
                f"version (format {FORMAT}): {bytes(version.data)[:80]!r}"
            )
        return doc

    def _read(self) -> tuple[int | None, dict | None, int | None]:
        versions = self.consensus.scan(self.key, 0)
        if not versions:
            return None, None, None
        docs: list[dict] = []
        base = None
        for version in reversed(versions):
            doc = self._parse(version)
            docs.append(doc)
            if "rollup" in doc:
                base = len(versions) - len(docs)
                break
        if base is None:
            raise CorruptState(
                f"consensus key {self.key!r} has no rollup among its live versions "
                f"{versions[0].seqno}..{versions[-1].seqno}"
            )
        docs.reverse()
        state = docs[0]["rollup"]
        for i in range(1, len(docs)):
            prev, cur = versions[base + i - 1].seqno, versions[base + i].seqno
            if cur != prev + 1:
                raise CorruptState(
                    f"consensus key {self.key!r} skips from version {prev} to {cur}"
                )
            apply_diff(state, docs[i]["diff"])
        return versions[-1].seqno, state, versions[base].seqno

    def load(self) -> tuple[int | None, dict | None]:
        """The head seqno and the state at it; ``(None, None)`` when no record exists.

        Reads the live versions in one scan, from the newest rollup. The returned dict is
        the caller's to mutate.
        """
        with self._lock:
            seqno, state, rollup_seqno = self._read()
            if seqno is None:
                self._cache = None
                return None, None
            self._cache = _Cached(seqno, _encode_state(state), rollup_seqno)
            return seqno, state

    def history(self) -> list[tuple[int, float, bool]]:
        """``(seqno, wall-clock commit time in seconds, is_rollup)`` of every live version."""
        return [
            (v.seqno, doc["ms"] / 1000.0, "rollup" in doc)
            for v in self.consensus.scan(self.key, 0)
            for doc in (self._parse(v),)
        ]

    @property
    def seqno(self) -> int | None:
        """The seqno this log last loaded or committed (None before either)."""
        return None if self._cache is None else self._cache.seqno

    # -- writing ---------------------------------------------------------------------------

    def commit(self, expected: int | None, state: dict) -> int:
        """Compare-and-set ``state`` as the version after ``expected``; its seqno.

        ``expected`` is the head seqno the caller's state was derived from (None: no record
        yet). Raises :class:`CommitConflict` (nothing written) when the head is elsewhere,
        ``TypeError``/``ValueError`` when ``state`` is not a JSON-able dict (nothing
        written), :class:`~colmz.storage.base.Determinate` when the consensus call failed
        without effect, and :class:`~colmz.storage.base.Indeterminate` only when re-reading
        could not tell whether the commit landed.
        """
        with self._lock:
            prepared = self.prepare(expected, state)
            self._compare_and_set(expected, prepared.new, prepared.commit_id)
            return self.landed(prepared)

    def prepare(self, expected: int | None, state: dict) -> Prepared:
        """The version :meth:`commit` would compare-and-set for ``state`` after
        ``expected`` (a diff from the cached head, or a rollup), built without writing
        anything; :func:`commit_together` commits it, then :meth:`landed` takes it. Raises
        as :meth:`commit` does before it writes (:class:`CommitConflict` when the head is
        not ``expected``: read to check when the cache is elsewhere)."""
        if expected is not None and (
            not isinstance(expected, int) or isinstance(expected, bool) or expected < 0
        ):
            raise ValueError(f"expected must be None or an int >= 0, got {expected!r}")
        encoded = _encode_state(state)
        with self._lock:
            if self._cache is None or self._cache.seqno != expected:
                found, _ = self.load()
                if found != expected:
                    raise CommitConflict(self.key, expected, found)
            cached = self._cache
            new_seqno = 1 if expected is None else expected + 1
            rollup = cached is None or new_seqno - cached.rollup_seqno >= self.rollup_every
            commit_id = uuid.uuid4().hex
            body = encoded.enc if rollup else _diff_body(cached.encoded, encoded)
            kind = "rollup" if rollup else "diff"
            data = (
                f'{{"format":{FORMAT},"id":"{commit_id}","ms":{int(time.time() * 1000)},'
                f'"{kind}":{body}}}'
            ).encode()
            return Prepared(self, expected, VersionedData(new_seqno, data), commit_id, encoded, rollup)

    def landed(self, prepared: Prepared) -> int:
        """Take ``prepared``, committed, as this log's head (and truncate below a rollup);
        its seqno."""
        if prepared.log is not self:
            raise ValueError(f"a version prepared by {prepared.log!r} handed to {self!r}")
        with self._lock:
            cached = self._cache
            new_seqno = prepared.new.seqno
            self._cache = _Cached(
                new_seqno, prepared.encoded, new_seqno if prepared.rollup else cached.rollup_seqno
            )
            size = len(prepared.new.data)
            self.stats.commits += 1
            self.stats.bytes_committed += size
            self.stats.last_commit_bytes = size
            if prepared.rollup:
                self.stats.rollups += 1
            if prepared.rollup and new_seqno > 1:
                try:
                    self.consensus.truncate(self.key, new_seqno)
                except StorageError:
                    # Truncation only reclaims space: the live versions stay readable from
                    # the newest rollup, and the next rollup truncates again.
                    self.stats.truncate_failures += 1
            return new_seqno

    def _compare_and_set(self, expected: int | None, new: VersionedData, commit_id: str) -> None:
        uncertain: Indeterminate | None = None
        for _ in range(self.max_attempts):
            self.stats.cas_attempts += 1
            try:
                ok = self.consensus.compare_and_set(self.key, expected, new)
            except Indeterminate as e:
                uncertain = e
                if self._landed(expected, new.seqno, commit_id):
                    self.stats.indeterminate_resolved += 1
                    return
                continue  # certainly not applied: the same CAS again is not a second write
            if ok:
                return
            # A delayed earlier attempt may be what beat this one.
            if uncertain is not None and self._landed(expected, new.seqno, commit_id):
                self.stats.indeterminate_resolved += 1
                return
            raise CommitConflict(self.key, expected, self._head_seqno())
        raise Indeterminate(
            f"commit of version {new.seqno} to consensus key {self.key!r}: "
            f"{self.max_attempts} attempts failed indeterminately and the last re-read found "
            f"it had not landed; a late request could still land, so reload before retrying"
        ) from uncertain

    def _head_seqno(self) -> int | None:
        try:
            head = self.consensus.head(self.key)
        except StorageError:
            return None
        return None if head is None else head.seqno

    def _reread(self, read):
        """``read()`` retried on storage errors (bounded); Indeterminate when it never works."""
        last: StorageError | None = None
        for _ in range(self.max_attempts):
            try:
                return read()
            except (Determinate, Indeterminate) as e:
                last = e
        raise Indeterminate(
            f"a commit to consensus key {self.key!r} timed out and the record could not be "
            f"re-read to learn whether it landed: {last}"
        ) from last

    def _landed(self, expected: int | None, new_seqno: int, commit_id: str) -> bool:
        """Whether our commit is in the record (True) or certainly not yet (False).

        Raises CommitConflict when another writer took the version, Indeterminate when the
        answer cannot be known (unreadable record, or the version truncated away).
        """
        head = self._reread(lambda: self.consensus.head(self.key))
        if head is None or head.seqno == expected:
            if head is None and expected is not None:
                raise CommitConflict(self.key, expected, None)
            return False
        if head.seqno < new_seqno:
            raise CommitConflict(self.key, expected, head.seqno)
        mine = head
        if head.seqno > new_seqno:
            found = self._reread(lambda: self.consensus.scan(self.key, new_seqno, limit=1))
            if not found or found[0].seqno != new_seqno:
                raise Indeterminate(
                    f"commit of version {new_seqno} to consensus key {self.key!r} timed out "
                    f"and that version has since been truncated (head is {head.seqno}): "
                    f"cannot tell whether it landed; reload"
                )
            mine = found[0]
        if self._parse(mine).get("id") == commit_id:
            return True
        raise CommitConflict(self.key, expected, head.seqno)


def commit_together(prepared: list[Prepared]) -> list[int]:
    """Commit versions of several logs (:meth:`StateLog.prepare`, one per log, all on one
    consensus) as one ``compare_and_set_many``: all of them or none (module docstring,
    invariant 5); their seqnos, each log then at its version (:meth:`StateLog.landed`).

    Raises :class:`CommitConflict` (naming a log whose head moved) when any of them lost:
    nothing was written. An indeterminate failure is resolved by re-reading one record --
    the step is atomic, so its head tells for all -- and the same step is sent again only
    when it certainly did not land; :class:`~colmz.storage.base.Indeterminate` when that
    cannot be known.

    >>> from colmz.storage import MemConsensus
    >>> cons = MemConsensus()
    >>> a, b = StateLog(cons, "a"), StateLog(cons, "b")
    >>> commit_together([a.prepare(None, {"seal": 1}), b.prepare(None, {"seal": 2})])
    [1, 1]
    >>> StateLog(cons, "b").load()
    (1, {'seal': 2})
    """
    if not prepared:
        return []
    first = prepared[0].log
    consensus = first.consensus
    if any(p.log.consensus is not consensus for p in prepared):
        raise ValueError("commit_together: the logs are on different consensus stores")
    if len({p.log.key for p in prepared}) != len(prepared):
        raise ValueError("commit_together: a log is named twice")
    ops = [(p.log.key, p.expected, p.new) for p in prepared]
    uncertain: Indeterminate | None = None
    for _ in range(first.max_attempts):
        first.stats.cas_attempts += 1
        try:
            ok = consensus.compare_and_set_many(ops)
        except Indeterminate as e:
            uncertain = e
            if first._landed(prepared[0].expected, prepared[0].new.seqno, prepared[0].commit_id):
                first.stats.indeterminate_resolved += 1
                break
            continue  # certainly not applied (atomic: none of it): the same step again
        if ok:
            break
        if uncertain is not None and first._landed(prepared[0].expected, prepared[0].new.seqno,
                                                   prepared[0].commit_id):
            first.stats.indeterminate_resolved += 1
            break
        for p in prepared:
            found = p.log._head_seqno()
            if found != p.expected:
                raise CommitConflict(p.log.key, p.expected, found)
        raise CommitConflict(first.key, prepared[0].expected, prepared[0].expected)
    else:
        raise Indeterminate(
            f"commit of {len(prepared)} versions together ({', '.join(p.log.key for p in prepared)}): "
            f"{first.max_attempts} attempts failed indeterminately and the last re-read found they "
            "had not landed; a late request could still land, so reload before retrying"
        ) from uncertain
    return [p.log.landed(p) for p in prepared]
