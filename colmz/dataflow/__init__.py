"""Views kept by delta rules: operators over ``colmz.Updates`` and the state they own.

Each operator is a type holding its state with ``step(time, delta) -> Updates``: the change of
its output at ``time`` given the change of its input(s), consolidated, every update at
``time`` -- a ``TemporalFilter``'s held flips that came due excepted, each at its own time
since the last step (Materialize's dataflow operators, ``src/compute/src/render/``; the delta
rules are DBSP's). Steps go forward in time; state is the input integrated up to the last step. A step
that raises leaves the operator's state as it was.

=======================  ==========================================  ============================
operator                 rule                                        state
=======================  ==========================================  ============================
``MapFilter``            linear (native trivial segments)            none
``Union``, ``Negate``    linear                                      none
``DeltaJoin``            one path per input, ``<``/``<=`` order      inputs arranged by key
``OuterJoin``            inner ∪ unmatched rows padded with NULLs    the inner join's
``AccumulableReduce``    accumulators += Σ value·diff per group      ``Accumulators`` by group
``MinMaxReduce``         re-reduce affected groups                   input arranged by group
``Collation``            reduces of both types joined per group      inputs arranged by group
``Distinct``             count 0 ↔ >0                                counts by row
``Threshold``            ``max(count, 0)``                           counts by row
``TopK``                 recompute affected groups' windows          input arranged by group
``TemporalFilter``       updates at the times ``mz_now()`` flips      future updates by time
``Constant``             its rows at the first step                  none
``ViewSink``             desired − persisted via ``Correction``       the correction buffer
=======================  ==========================================  ============================

``colmz.dataflow.recompute.GroupRecompute`` (basic aggregates, window functions, text
ordered by its collation) reruns a group-local SQL query in DuckDB over the groups a delta
touches, its input and output arranged by group; it runs SQL, so it stands above the SQL
layer and is imported from its module.

``colmz.dataflow.shared`` holds the arrangements a catalog shares between views: an
operator arranging an input read as is (a join's input, a min/max or per-group recompute's)
takes the one arrangement of that relation by that key, fed once per commit.

``colmz.dataflow.plan`` builds a view's relational plan from its SQL (``plan``), prints it
(``Plan.explain``) and renders it into these operators (``render``) for the incremental
subset its docstring lists; the rest is a ``Fallback`` naming its reason. Scalar expressions
of linear segments through ``colmz.sql.translate``, rendering a Fallback are not here yet.
``colmz.dataflow.iterate.Iterate`` keeps a ``WITH RECURSIVE`` query (a plan's ``LetRec``): one
instance of its recursive term's rendered operators per iteration, each fed the deltas of its
working table and of the tables, until an iteration's change is empty; it is rendered by the
plan and imported from its module.
``colmz.dataflow.state`` exports each operator's state as a collection of updates and
restores a pipeline from snapshots of them (a durable catalog's views resume from it).
"""

from colmz.dataflow.accumulable import (
    AccumulableReduce,
    Accumulators,
    Avg,
    BoolAnd,
    BoolOr,
    Count,
    StddevPop,
    StddevSamp,
    Sum,
    VarPop,
    VarSamp,
)
from colmz.dataflow.collate import Collation
from colmz.dataflow.constant import Constant
from colmz.dataflow.distinct import Distinct, Threshold
from colmz.dataflow.join import DeltaJoin
from colmz.dataflow.keyed import KeyedArrangement, Matches
from colmz.dataflow.linear import Negate, Union
from colmz.dataflow.mapfilter import Column, Compare, IsNull, MapFilter, Output, Predicate
from colmz.dataflow.minmax import Max, Min, MinMaxReduce
from colmz.dataflow.outer import OuterJoin
from colmz.dataflow.sink import ViewSink
from colmz.dataflow.temporal import Bound, TemporalFilter
from colmz.dataflow.topk import OrderBy, TopK

__all__ = [
    "AccumulableReduce",
    "Accumulators",
    "Avg",
    "BoolAnd",
    "BoolOr",
    "Bound",
    "Collation",
    "Column",
    "Compare",
    "Constant",
    "Count",
    "DeltaJoin",
    "Distinct",
    "IsNull",
    "KeyedArrangement",
    "MapFilter",
    "Matches",
    "Max",
    "Min",
    "MinMaxReduce",
    "Negate",
    "OrderBy",
    "OuterJoin",
    "Output",
    "Predicate",
    "StddevPop",
    "StddevSamp",
    "Sum",
    "TemporalFilter",
    "Threshold",
    "TopK",
    "Union",
    "VarPop",
    "VarSamp",
    "ViewSink",
]
