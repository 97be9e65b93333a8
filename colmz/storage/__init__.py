"""Durable storage for colmz's structures: Blob (immutable parts) and Consensus (versioned
metadata by compare-and-set). See :mod:`colmz.storage.base` for the contracts."""

from colmz.storage.base import (
    Blob,
    Consensus,
    Determinate,
    Indeterminate,
    MemBlob,
    MemConsensus,
    StorageError,
    VersionedData,
    check_key,
)

__all__ = [
    "Blob",
    "Consensus",
    "Determinate",
    "Indeterminate",
    "MemBlob",
    "MemConsensus",
    "StorageError",
    "VersionedData",
    "check_key",
]
