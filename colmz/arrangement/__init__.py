"""``colmz.arrangement``: the durable arrangement, a package shaped like persist-client.

The package's public names are re-exported here, so ``from colmz.arrangement import
Arrangement, CommitConflict`` needs no module path. Its modules:

* :mod:`colmz.arrangement.handle` -- :class:`Arrangement`, the handle: ``open``,
  ``refresh``, ``commit``, the state document; it puts together
  :mod:`colmz.arrangement.core` (the upstream core operations),
  :mod:`colmz.arrangement.write_handle` (``write``, ``append_runs``, ``seal``,
  ``advance_since``), :mod:`colmz.arrangement.read_handle` (``read``, ``parts``),
  :mod:`colmz.arrangement.maintain` (``maintain``, ``CompactionJob``, the policies) and
  :mod:`colmz.arrangement.gc` (``gc``, leases);
* :mod:`colmz.arrangement.schema` -- the schema's specs and JSON form;
* :mod:`colmz.arrangement.state` -- :class:`ArrangementState`, the state as one frozen value
  with pure transitions;
* :mod:`colmz.arrangement.machine` -- ``Machine``: owns the state; the one command loop:
  apply a pure command, compare-and-set, retry on the new head;
* :mod:`colmz.arrangement.collection` -- ``ArrangementCollection``, the arrangement as a
  collection of continual tasks and the durable catalog;
* :mod:`colmz.arrangement.meta` -- batch metadata, descriptions, requests and responses, the
  invariants' validator, the metadata's dict form;
* :mod:`colmz.arrangement.parts` -- Parquet parts in the blob store: the format, keys,
  checked reading; :mod:`colmz.arrangement.part_ref` -- ``PartRef``, a part's key with the
  check its reads verify; :mod:`colmz.arrangement.part_writer` -- ``PartWriter``, writing
  parts; :mod:`colmz.arrangement.merge` -- the streaming merge of runs of parts (drains,
  compactions); :mod:`colmz.arrangement.gather` -- rows gathered by position;
* :mod:`colmz.arrangement.read` -- the merged read of several sorted runs, ordered by the
  words of :mod:`colmz.arrangement.read_words`;
* :mod:`colmz.arrangement.runs` -- runs of parts written by other processes (Spark
  executors) for :meth:`Arrangement.append_runs`;
* :mod:`colmz.arrangement.identity` -- the store's identity and its consensus key;
* :mod:`colmz.arrangement.errors` -- the family's exceptions.
"""

from colmz.arrangement.handle import (
    Arrangement,
    ArrangementError,
    CommitConflict,
    CompactionJob,
    CorruptMeta,
    CorruptPart,
    EmptyBatch,
    IdentityMismatch,
    InvalidAsOf,
    InvalidBatchBounds,
    InvalidSnapshotBounds,
    LeaseExpired,
    MetadataLost,
    MetadataRolledBack,
    MissingPart,
    NonContiguousMerge,
    PartInfo,
    SchemaMismatch,
    SealMismatch,
    SealRegression,
    SeqNoMismatch,
    SinceBehindInput,
    SinceRegression,
    TimeBeforeSeal,
    TimeBeforeTraceUpper,
    TraceSnapshot,
    new_token,
    normalize_schema,
    schema_from_json,
    schema_to_json,
)
from colmz.arrangement.state import ArrangementState

__all__ = [
    "Arrangement",
    "ArrangementError",
    "ArrangementState",
    "CommitConflict",
    "CompactionJob",
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
    "PartInfo",
    "SchemaMismatch",
    "SealMismatch",
    "SealRegression",
    "SeqNoMismatch",
    "SinceBehindInput",
    "SinceRegression",
    "TimeBeforeSeal",
    "TimeBeforeTraceUpper",
    "TraceSnapshot",
    "new_token",
    "normalize_schema",
    "schema_from_json",
    "schema_to_json",
]
