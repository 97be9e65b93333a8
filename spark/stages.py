"""A view's plan cut into stages, each bucketed by its own key: the shuffles between
differently keyed operators.

Design
------
``colmz.spark.views`` runs a view's stateful operators per key bucket. Operators keyed alike
(a join on ``k``, then a reduce grouped by ``k``) share a bucketing and run in one task per
bucket; operators keyed differently (a join on ``k``, then a reduce grouped by ``w``) need
the first one's output delta *re-bucketed* by the second one's key -- a shuffle, as
Materialize's dataflow exchanges an operator's output by the next arrangement's key
(``src/compute/src/render/``). :func:`plan_stages` cuts a plan
(``colmz.dataflow.plan``) into such **stages**, each a subtree of the plan whose leaves are
either a table (a ``Get``) or the output of a lower stage, bucketed by one key:

* A stage starts at its top (the plan's root, or a cut) and goes through Map/Filters to its
  *top operator*: a keyed operator over one input (a reduce's group columns, a distinct's
  or a threshold's every column, a top-k's or window's partition; keyed by nothing is
  refused: one bucket), an equi-join, inner or outer (its equated columns, one *position*
  per class of columns equated with each other that reaches every input), or a union or
  negate (linear: every column a position). The top operator's key gives the stage's key
  *positions*, each named by a column wherever it is carried unchanged.
* Downwards, a position is traced through Map/Filters (a native one's ``select`` pairs, a
  SQL one's placeholder of an input column; a computed column ends it), through a keyed
  operator when it is one of that operator's key columns (which keep their names), through
  a union into every input (by position) and through a negate, and through a join into
  every input when its column is equated with a column of each (else it ends) -- for an
  outer join, only a column of a preserved input (a NULL-padded column does not hold the
  key its row was bucketed by). A branch where no position would be left -- a keyed
  operator whose key carries none of them, a join equating none of them, a table reached
  only through computed columns -- is **cut** where it leaves the operator above (the top
  of its Map/Filters): the branch becomes a lower stage, built the same way, and this
  stage reads its output as a leaf whose key is the positions' columns there.
* The stage's key is the positions every leaf still carries; each leaf is bucketed by
  its columns of those positions, so every row each of the stage's operators needs for a
  key meets in one bucket (bucketing by part of a key is correct: equal keys agree on
  every part). When the leaves carry no common position (two branches each keeping a
  different one), the stage is built again cutting every branch where a position ends.
* A stage without a stateful operator (Map/Filters over a table, below an operator keyed
  by a computed column) is bucketed by every column of its table: Map/Filters act row by
  row, so any bucketing is correct, and the cut output is bucketed by the computed key.

Every leaf of a stage is its own input, ``_colmz_in<j>`` (a table read twice, a
self-join, is two leaves, each bucketed by its own key); a lower stage's output columns
are ``c0, c1, ...`` by position (plan names such as ``t.k`` are awkward in a DataFrame).
The stages come bottom-up, the root's last; each is rendered alone
(``colmz.dataflow.render`` of :func:`stage_plan`), so the operators of all the stages
are exactly the whole plan's, each stepped with the same deltas at the same time: the
root stage's output is the view's.

NULL keys: Spark hashes a NULL to one value, so every row with a NULL key (which a join
matches with nothing and a reduce groups together) meets in one bucket.

A temporal filter (``mz_now()`` compared with a column) is at the top of a plan, nothing
stateful above it (``colmz.dataflow.plan``): it runs in the root stage, above its top
operator, row by row (any bucketing holds). Its flips still to come are each bucket's state;
they come due without input, so a bucket holding such state steps when its next flip is due
(its task reports it, the record keeps it: ``colmz.spark.views``).

Refused (:class:`StageError`, naming the node): a node that is none of those (a constant,
a Fallback), an operator keyed by nothing, a join without an equality.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from colmz.dataflow.plan_nodes import (
    Distinct,
    Get,
    GroupSql,
    Join,
    MapFilter,
    Negate,
    Node,
    Plan,
    Reduce,
    SqlMapFilter,
    TemporalFilter,
    Threshold,
    TopK,
    Union,
)
from colmz.dataflow.sqlmap import placeholder
from colmz.order import ColumnSpec

__all__ = ["Stage", "StageError", "input_name", "plan_stages", "stage_plan"]


class StageError(ValueError):
    """A plan that cannot be cut into bucketed stages; the message names the node."""


@dataclass(frozen=True)
class Stage:
    """One stage of a plan (module docstring).

    ``root`` is the stage's subtree, each leaf replaced by a ``Get`` of its input
    ``input_name(j)``; ``inputs`` those inputs' schemas (a table's own columns, or a lower
    stage's ``c0, c1, ...``); ``sources`` where each input's delta comes from,
    ``("table", name)`` or ``("stage", index)``; ``keys`` each input's bucket columns
    (one per position of the stage's key, in the same order); ``schema`` the stage's
    output columns (the view's for the root stage, else ``c0, c1, ...``)."""

    root: Node
    inputs: tuple[tuple[ColumnSpec, ...], ...]
    sources: tuple[tuple[str, str], ...]
    keys: tuple[tuple[str, ...], ...]
    schema: tuple[ColumnSpec, ...]


def input_name(j: int) -> str:
    """The table name of a stage's ``j``-th input in its plan."""
    return f"_colmz_in{j}"


def positional(schema) -> tuple[ColumnSpec, ...]:
    """``schema``'s columns renamed ``c0, c1, ...`` (a lower stage's output)."""
    return tuple(ColumnSpec(f"c{i}", c.type) for i, c in enumerate(schema))


def stage_plan(p: Plan, stage: Stage) -> Plan:
    """The plan of one stage: its root over its inputs as tables."""
    return Plan(stage.root, p.text, {input_name(j): s for j, s in enumerate(stage.inputs)})


def keyed(node: Node) -> list[str] | None:
    """The key of a keyed stateful node over one input as columns of its input (``[]``:
    keyed by nothing); ``None`` for any other node."""
    if isinstance(node, (Reduce, TopK)):
        return list(node.group_by)
    if isinstance(node, (Distinct, Threshold)):
        return [c.name for c in node.input.schema]
    if isinstance(node, GroupSql):
        return list(node.key)
    return None


def _mapfilter_input(node: Node, col: str) -> str | None:
    """The input column ``col`` (an output column of Map/Filter ``node``) is carried from
    unchanged, or ``None`` when it is computed."""
    if node.select is None:
        return col
    if isinstance(node, MapFilter):
        return {n: s for s, n in node.select}.get(col)
    inputs = {placeholder(i): c.name for i, c in enumerate(node.input.schema)}
    return {n: inputs.get(text) for text, n in node.select}.get(col)


def _classes(join: Join) -> list[set[str]]:
    """The classes of columns a join equates (transitively), in the order of ``on``."""
    classes: list[set[str]] = []
    for a, b in join.on:
        hit = [c for c in classes if a in c or b in c]
        merged = {a, b}.union(*hit)
        classes = [c for c in classes if not any(c is h for h in hit)]
        classes.append(merged)
    order = [a for a, _ in join.on]
    return sorted(classes, key=lambda c: min(order.index(x) for x in c if x in order))


#: The inputs of a join whose columns hold their own value in every output row (an outer
#: join pads the other side's with NULLs where a row matches nothing).
_PRESERVED = {"inner": None, "left": {0}, "right": {1}, "full": set()}


def _through_join(join: Join, alive: Mapping[int, str], top: bool = False) -> list[dict[int, str]]:
    """Each input's columns of the positions ``alive`` (at the join's output) that every
    input carries: a position's column equated with a column of every input -- and, from
    above an outer join (not ``top``), a column of a preserved input (a NULL-padded one
    does not hold the key its row was bucketed by)."""
    classes = _classes(join)
    preserved = _PRESERVED[join.kind]
    per = [dict() for _ in join.inputs_]
    for pos, col in alive.items():
        cls = next((c for c in classes if col in c), None)
        if cls is None:
            continue
        owner = next(i for i, x in enumerate(join.inputs_) if col in {c.name for c in x.schema})
        if not top and preserved is not None and owner not in preserved:
            continue
        members = [next((c.name for c in i.schema if c.name in cls), None) for i in join.inputs_]
        if all(m is not None for m in members):
            for d, m in zip(per, members):
                d[pos] = m
    return per


def _through_union(node: Union, alive: Mapping[int, str]) -> list[dict[int, str]]:
    """Each input's columns of the positions ``alive``: a union's columns are its inputs'
    by position."""
    index = {c.name: i for i, c in enumerate(node.schema)}
    return [{p: i.schema[index[c]].name for p, c in alive.items()} for i in node.inputs]


class _Builder:
    def __init__(self, p: Plan):
        self.p = p
        self.stages: list[Stage] = []
        self.built: dict[int, int] = {}  # id of a cut branch -> its stage

    def refuse(self, node: Node, why: str) -> StageError:
        return StageError(f"has a {type(node).__name__} {why}:\n{self.p.explain()}")

    def build(self, top: Node) -> int:
        """Build the stage whose top is ``top`` (and the stages below it); its index."""
        node = top
        # A temporal filter sits at the top of a plan (colmz.dataflow.plan): row by row, so
        # it holds in any bucket, its flips to come kept by each bucket's operator.
        while isinstance(node, (MapFilter, SqlMapFilter, TemporalFilter)):
            node = node.input
        if isinstance(node, Get):  # Map/Filters only: bucketed by every column
            raw = tuple(s for s, _ in node.columns)
            leaves = [(node, ("table", node.table), {i: c for i, c in enumerate(raw)})]
            return self._add(top, leaves, list(range(len(raw))))
        for strict in (False, True):
            # a rebuild forgets the stages the first attempt cut below this one
            n, built = len(self.stages), dict(self.built)
            leaves: list = []
            self._branches_of_top(node, leaves, strict)
            common = set.intersection(*(set(a) for _, _, a in leaves))
            if common:
                return self._add(top, leaves, sorted(common))
            del self.stages[n:]
            self.built = built
        raise self.refuse(node, "whose inputs carry no common key column")  # pragma: no cover - strict keeps all

    def _branches_of_top(self, node: Node, leaves: list, strict: bool) -> None:
        key = keyed(node)
        if key == []:
            raise self.refuse(node, "keyed by nothing (a global aggregate, a LIMIT over all rows, a window "
                                    "without PARTITION BY: one bucket)")
        if key is not None:
            self._branch(node.input, dict(enumerate(key)), leaves, strict)
        elif isinstance(node, Join) and (node.kind == "inner" or len(node.inputs_) == 2):
            classes = _classes(node)
            if not classes:
                raise self.refuse(node, "without an equality (a cross join cannot be bucketed)")
            per = _through_join(node, {i: next(iter(sorted(c))) for i, c in enumerate(classes)}, top=True)
            if not per[0]:
                raise self.refuse(node, "equating no column of every input")
            for branch, alive in zip(node.inputs_, per):
                self._branch(branch, alive, leaves, strict)
        elif isinstance(node, (Union, Negate)):  # linear: any bucketing; by every column, as below
            alive = {i: c.name for i, c in enumerate(node.schema)}
            per = _through_union(node, alive) if isinstance(node, Union) else [alive]
            for branch, a in zip(node.inputs, per):
                self._branch(branch, a, leaves, strict)
        else:
            raise self.refuse(node, "where a stateful operator goes (a keyed operator, a join or a union)")

    def _branch(self, branch: Node, alive: dict[int, str], leaves: list, strict: bool) -> None:
        """Walk a branch (an input of an operator of this stage) whose output carries the
        positions ``alive``; cut it when none would be left (or, ``strict``, any)."""
        node, here = branch, dict(alive)
        while isinstance(node, (MapFilter, SqlMapFilter)):
            here = {p: c for p, c in ((p, _mapfilter_input(node, c)) for p, c in here.items()) if c is not None}
            node = node.input
        if isinstance(node, Get):
            raw = {n: s for s, n in node.columns}
            here = {p: raw[c] for p, c in here.items()}
            if here and not (strict and len(here) < len(alive)):
                leaves.append((node, ("table", node.table), here))
                return
            return self._cut(branch, alive, leaves)
        key = keyed(node)
        if key is not None:
            if key == []:
                raise self.refuse(node, "keyed by nothing (a global aggregate, a LIMIT over all rows, a window "
                                        "without PARTITION BY: one bucket)")
            out = {c.name for c in node.schema}
            below = {p: c for p, c in here.items() if c in key and c in out}
            if not below or (strict and len(below) < len(alive)):
                return self._cut(branch, alive, leaves)
            return self._branch(node.input, below, leaves, strict)
        if isinstance(node, (Union, Negate)):  # linear: the positions go on into every input
            if not here or (strict and len(here) < len(alive)):
                return self._cut(branch, alive, leaves)
            per = _through_union(node, here) if isinstance(node, Union) else [here]
            for b, a in zip(node.inputs, per):
                self._branch(b, a, leaves, strict)
            return None
        if isinstance(node, Join) and (node.kind == "inner" or len(node.inputs_) == 2):
            per = _through_join(node, here)
            if not per[0] or (strict and len(per[0]) < len(alive)):
                return self._cut(branch, alive, leaves)
            for b, a in zip(node.inputs_, per):
                self._branch(b, a, leaves, strict)
            return None
        raise self.refuse(node, "where a keyed operator, a join, a union or Map/Filters over a table go "
                                "(temporal filters, constants and recomputed subqueries do not run per bucket)")

    def _cut(self, branch: Node, alive: dict[int, str], leaves: list) -> None:
        index = self.built.get(id(branch))
        if index is None:  # a branch cut again (by a strict rebuild of a stage above) keeps its stage
            index = self.built[id(branch)] = self.build(branch)
        names = {c.name: f"c{i}" for i, c in enumerate(branch.schema)}
        leaves.append((branch, ("stage", str(index)), {p: names[c] for p, c in alive.items()}))

    def _add(self, top: Node, leaves: list, positions: list[int]) -> int:
        replaced: dict[int, Node] = {}
        inputs, sources, keys = [], [], []
        for j, (leaf, source, alive) in enumerate(leaves):
            if source[0] == "table":
                schema = tuple(self.p.tables[leaf.table])
                get = dataclasses.replace(leaf, table=input_name(j))
            else:
                schema = positional(leaf.schema)
                get = Get(leaf.schema, input_name(j), input_name(j),
                          tuple((f"c{i}", c.name) for i, c in enumerate(leaf.schema)))
            replaced[id(leaf)] = get
            inputs.append(schema)
            sources.append(source)
            keys.append(tuple(alive[p] for p in positions))
        root = _substitute(top, replaced)
        schema = tuple(top.schema) if top is self.p.root else positional(top.schema)
        self.stages.append(Stage(root, tuple(inputs), tuple(sources), tuple(keys), schema))
        return len(self.stages) - 1


def _substitute(node: Node, replaced: Mapping[int, Node]) -> Node:
    if id(node) in replaced:
        return replaced[id(node)]
    if isinstance(node, (Join, Union)):
        return dataclasses.replace(node, inputs_=tuple(_substitute(i, replaced) for i in node.inputs_))
    if node.inputs:
        return dataclasses.replace(node, input=_substitute(node.input, replaced))
    return node


def plan_stages(p: Plan) -> list[Stage]:
    """The stages of plan ``p``, bottom-up, the root's last (module docstring);
    :class:`StageError` naming the node for a plan that cannot be bucketed.

    >>> import pyarrow as pa
    >>> from colmz.dataflow.plan import plan
    >>> p = plan("SELECT u.w, sum(t.v) AS s FROM t JOIN u ON t.k = u.k GROUP BY u.w",
    ...          {"t": {"k": pa.int64(), "v": pa.int64()}, "u": {"k": pa.int64(), "w": pa.string()}})
    >>> [(s.sources, s.keys) for s in plan_stages(p)]
    [((('table', 't'), ('table', 'u')), (('k',), ('k',))), ((('stage', '0'),), (('c3',),))]
    """
    b = _Builder(p)
    b.build(p.root)
    return b.stages
