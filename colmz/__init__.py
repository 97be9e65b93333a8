"""colmz: differential collections as columnar updates.

Updates ``(data, time, diff)`` held as structure-of-arrays batches, with Numba kernels that
sort, consolidate, split, merge and advance them, and the state structures of Materialize and
differential dataflow built on top. Public names only; each lives in a module named for its
concept.

>>> import colmz
>>> u = colmz.Updates({"k": ["a", "b", "a"]}, time=[0, 0, 0], diff=[1, 1, -1])
>>> colmz.consolidate(u).to_pylist()
[('b', 0, 1)]
"""

from colmz.arrangement import Arrangement, ArrangementError, PartInfo
from colmz.as_of import (
    AsOfSelection,
    AsOfSelectionError,
    Dataflow,
    Export,
    ExportKind,
    LagWritesBy,
    MissingStorageFrontiers,
    Multiple,
    ReadPolicy,
    StorageFrontiers,
    UnknownCollection,
    ValidFrom,
    lag_writes_by,
    select_as_ofs,
)
from colmz.catalog import Catalog
from colmz.collection import MemoryCollection, UpperMismatch
from colmz.continual import ContinualTask
from colmz.correction import Correction
from colmz.errors import SinceRegression
from colmz.frontier import MAX_TIME, Frontier
from colmz.ops import concat, consolidate
from colmz.order import ColumnSpec
from colmz.runtime import release_scratch, set_cache_dir, warmup
from colmz.spine import (
    EXERT_LOGICS,
    BatchBoundsError,
    FrontierRegressionError,
    Spine,
    SpineBatch,
    proportional_exert_logic,
)
from colmz.updates import SchemaError, Updates

__all__ = [
    "Arrangement",
    "ArrangementError",
    "PartInfo",
    "AsOfSelection",
    "AsOfSelectionError",
    "Dataflow",
    "Export",
    "ExportKind",
    "LagWritesBy",
    "MissingStorageFrontiers",
    "Multiple",
    "ReadPolicy",
    "StorageFrontiers",
    "UnknownCollection",
    "ValidFrom",
    "lag_writes_by",
    "select_as_ofs",
    "MAX_TIME",
    "Catalog",
    "MemoryCollection",
    "UpperMismatch",
    "ColumnSpec",
    "ContinualTask",
    "Correction",
    "Frontier",
    "SchemaError",
    "SinceRegression",
    "Spine",
    "SpineBatch",
    "BatchBoundsError",
    "FrontierRegressionError",
    "EXERT_LOGICS",
    "proportional_exert_logic",
    "Updates",
    "concat",
    "consolidate",
    "release_scratch",
    "set_cache_dir",
    "warmup",
]
__version__ = "0.1.0"
