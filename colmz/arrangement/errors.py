"""The errors of :class:`colmz.Arrangement`.

Every error an arrangement raises for a caller's mistake or a damaged store is an
:class:`ArrangementError`. The names of the core's errors follow the checks of
``src/persist/src/indexed/arrangement.rs`` and ``background.rs`` (which returned strings there);
each also derives from the builtin family colmz uses for that kind of mistake, so
``except ValueError`` keeps working: regressions and bounds are ``ValueError``, a schema
difference is a ``TypeError`` (:class:`colmz.SchemaError`), a damaged store is a
``RuntimeError``.

A call that raises any of these has changed nothing, in memory or in storage.

Layer: the *errors* of ``colmz.arrangement`` (``docs/arrangement.md``), imported by every
other layer and importing none of them.
"""

from __future__ import annotations

from colmz.errors import SinceRegression as SharedSinceRegression
from colmz.updates import SchemaError

__all__ = [
    "ArrangementError",
    "CorruptMeta",
    "CorruptPart",
    "EmptyBatch",
    "IdentityMismatch",
    "InvalidAsOf",
    "InvalidBatchBounds",
    "InvalidSnapshotBounds",
    "LeaseExpired",
    "MetadataLost",
    "MetadataRolledBack",
    "MissingPart",
    "NonContiguousMerge",
    "SchemaMismatch",
    "SealMismatch",
    "SealRegression",
    "SeqNoMismatch",
    "SinceBehindInput",
    "SinceRegression",
    "TimeBeforeSeal",
    "TimeBeforeTraceUpper",
]


class ArrangementError(Exception):
    """Base class of every error an arrangement raises."""


class SeqNoMismatch(ArrangementError, ValueError):
    """An appended batch's seqno range does not start at the arrangement's seqno upper."""


class EmptyBatch(ArrangementError, ValueError):
    """An append of a batch with no updates."""


class TimeBeforeTraceUpper(ArrangementError, ValueError):
    """An appended update's time is before the trace's physical upper."""


class TimeBeforeSeal(ArrangementError, ValueError):
    """A write of an update at a time the arrangement has already sealed."""


class InvalidSnapshotBounds(ArrangementError, ValueError):
    """An unsealed snapshot whose upper is before its lower."""


class InvalidBatchBounds(ArrangementError, ValueError):
    """A drain whose description would be empty or inverted (the seal was reverted below
    the trace's upper)."""


class SealMismatch(ArrangementError, ValueError):
    """A commit expected the seal at one frontier and found it at another (``expect=``)."""


class SealRegression(ArrangementError, ValueError):
    """A seal before the current seal."""


class SinceRegression(ArrangementError, SharedSinceRegression):
    """A compaction frontier (since) before the current one.

    Also a :class:`colmz.SinceRegression`, so one ``except`` catches the regressions of every
    colmz structure.
    """


class NonContiguousMerge(ArrangementError, ValueError):
    """A compaction of trace batches whose time intervals do not follow each other."""


class SinceBehindInput(ArrangementError, ValueError):
    """A compaction whose output since is before one of its inputs' since."""


class InvalidAsOf(ArrangementError, ValueError):
    """A read at a time the arrangement cannot answer (before its since, or not sealed)."""


class SchemaMismatch(ArrangementError, SchemaError):
    """Updates or a requested schema differ from the arrangement's pinned schema."""


class CorruptMeta(ArrangementError, ValueError):
    """Arrangement metadata that is malformed or breaks an invariant."""


class CorruptPart(ArrangementError, RuntimeError):
    """A part in the blob store that is not a valid arrangement part."""


class MissingPart(ArrangementError, RuntimeError):
    """A part the metadata names is absent from the blob store."""


class LeaseExpired(ArrangementError, RuntimeError):
    """A commit whose new parts are too old: ``gc`` may already have collected them."""


class IdentityMismatch(ArrangementError, RuntimeError):
    """The consensus record an arrangement would use belongs to another store's blob (or the
    blob's identity and the record's disagree): reading it would show another store's
    contents and writing it would break that store. Nothing was read or written."""


class MetadataLost(ArrangementError, RuntimeError):
    """A blob holds parts of an arrangement but no consensus record accounts for them (a
    deleted or truncated ``consensus.sqlite``, a wrong ``consensus=`` URL): creating a new
    arrangement there, or collecting its garbage, would lose them. Nothing was written."""


class MetadataRolledBack(MetadataLost):
    """The consensus record is older than a state this store's blob proves existed (a
    consensus restored from a backup, a directory copy that took ``consensus.sqlite`` before
    ``blob/``, a point-in-time restore of PostgreSQL under a bucket that kept its newer
    parts): opening it would accept writes at times that were final and collecting its
    garbage would delete the newer parts. Nothing was written
    (``colmz.arrangement.identity``, "Rolled-back metadata")."""
