"""Durable storage for colmz's structures: Blob (immutable parts) and Consensus (versioned
metadata by compare-and-set). See :mod:`colmz.storage.base` for the contracts,
:mod:`colmz.storage.state` for versioned state kept as diffs, :mod:`colmz.storage.url`
for opening a store from a URL, and :mod:`colmz.storage.faults` for fault injection. The optional backends are imported on use:
:class:`colmz.storage.s3.S3Blob` and :class:`colmz.storage.postgres.PostgresConsensus`."""

from colmz.storage.base import (
    MAX_SEQNO,
    Blob,
    Consensus,
    Determinate,
    Indeterminate,
    MemBlob,
    MemConsensus,
    StorageError,
    VersionedData,
    check_cas_args,
    check_cas_many,
    check_key,
)
from colmz.storage.local import LocalBlob
from colmz.storage.sqlite import SqliteConsensus
from colmz.storage.state import CommitConflict, CorruptState, StateLog, StateStats
from colmz.storage.url import Location, open_consensus, open_location

__all__ = [
    "MAX_SEQNO",
    "Blob",
    "CommitConflict",
    "Consensus",
    "CorruptState",
    "Determinate",
    "Indeterminate",
    "LocalBlob",
    "Location",
    "MemBlob",
    "MemConsensus",
    "SqliteConsensus",
    "StateLog",
    "StateStats",
    "StorageError",
    "VersionedData",
    "check_cas_args",
    "check_cas_many",
    "check_key",
    "open_consensus",
    "open_location",
]
