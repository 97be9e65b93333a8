"""PostgreSQL's interval rules that hang on a column's type: applied to a translated query
once the relations it reads (and so which of their columns are intervals) are known.

:func:`colmz.sql.translate.translate` sees text only: it turns ``INTERVAL '1 day' / 2`` into
PostgreSQL's division because the literal shows its type, but ``d / 2`` of an interval
column is DuckDB's (which has no such operator). The catalog knows the relations' column
types when it runs a query; :func:`interval_edits`, over the
references resolved (:mod:`colmz.sql.column_rules`) and over a value that is an interval -- a column
resolved to an interval column, a cast to ``interval``, ``+``/``-`` of intervals, an
interval times or divided by a number -- applies PostgreSQL 15's computation
(``src/backend/utils/adt/timestamp.c``):

* **interval * number**, **number * interval**, **interval / number** (``interval_mul``,
  ``interval_div``): the number read as a ``float8`` (an integer, numeric or real is
  converted, as PostgreSQL's implicit casts do), each part scaled, the fraction of a month
  cascaded down as 30 days and of a day as 24 hours, microseconds rounded
  (:func:`colmz.sql.pgfuncs.interval_mul`, :func:`colmz.sql.pgfuncs.interval_div`): DuckDB
  keeps no fraction of a month or day. The overflow check translate put around a product
  of two values it could not type (:data:`colmz.sql.transforms.FLOAT_CHECK`) is dropped:
  the product is not a float.
* **sum(interval)** (``interval_pl`` over the rows): months, days and microseconds each
  summed alone, never normalised (``'1 mon' + '30 days'`` is ``1 mon 30 days``), NULL for
  no rows, "interval out of range" past PostgreSQL's fields; as an aggregate (``FILTER``,
  ``GROUP BY``) and as a window function (``OVER``): three sums of the parts
  (:data:`colmz.sql.pgfuncs.INTERVAL_PARTS`), each with the call's own ``FILTER`` and
  ``OVER``, made one interval (:data:`colmz.sql.pgfuncs.INTERVAL_OF_SUMS`). **avg(interval)**
  is PostgreSQL's ``interval_avg``: that sum divided by the count of values
  (``interval_div``). ``DISTINCT`` over intervals is refused by name: PostgreSQL's keeps one
  of equal values written differently (``'1 mon'``, ``'30 days'``), which colmz cannot
  choose as it does.
* **percentile_cont(f) WITHIN GROUP (ORDER BY interval)**: the group's values in
  PostgreSQL's order, the two rows around ``f * (n - 1)`` interpolated by ``interval_lerp``
  (:func:`colmz.sql.pgfuncs.interval_percentile_cont`); an array of fractions is refused
  by name. (``percentile_disc``, ``min`` and ``max`` of intervals are DuckDB's, which
  orders intervals as PostgreSQL does.)

Invariants: a rule applies only to a value certainly an interval (a reference the resolver
could not resolve is left as DuckDB computes it, which refuses it by name); the rewrite is a
pure function of the text and the relations' interval columns, cached; a text the tree
cannot read is returned unchanged; where two rewritten nodes nest across a subquery
boundary the outer one is kept and the inner one left to DuckDB (refused, as before).
"""

from __future__ import annotations

import re

from colmz.sql.build import splice
from colmz.sql.errors import UnsupportedSQL
from colmz.sql.pgfuncs import (
    INTERVAL_DIV,
    INTERVAL_MUL,
    INTERVAL_OF_SUMS,
    INTERVAL_PARTS,
    INTERVAL_PERCENTILE_CONT,
)
from colmz.sql.transforms import FLOAT_CHECK, NOT_INTERVAL, PERCENTILE_CONT
from colmz.sql.translate import SUM_ARGUMENT
from colmz.sql.tree import Expression
from colmz.sql.typing_pass import ResolvedRules, TypedText, outermost_edits, window_arguments

__all__ = ["interval_edits"]

_DISTINCT_REFUSAL = ("{f}(DISTINCT ...) of an interval is not supported by colmz (PostgreSQL keeps one of "
                     "equal intervals written differently, '1 mon' or '30 days')")
_ARRAY_FRACTIONS = ("percentile_cont() of intervals at an array of fractions is not supported by colmz "
                    "(PostgreSQL interpolates each fraction with its interval arithmetic)")
_DISTINCT = re.compile(r"\bdistinct\b", re.IGNORECASE)
_FILTER = re.compile(r"\)\s*filter\s*\(", re.IGNORECASE)


def interval_edits(t: TypedText) -> list[tuple[int, int, str]]:
    """The edits of this module's rules over ``t``: each outermost node they rewrite."""
    return outermost_edits(t.queries, _Rules(t.text, t.resolved))


class _Rules(ResolvedRules):
    # the interval columns' rules, over the nodes of one text
    def interval(self, e: Expression) -> bool:
        # whether ``e`` is certainly an interval
        if e.cls == "COLUMN_REF":
            return self.resolved.get((e.start, e.end)) == "interval"
        if e.cls == "CAST" and len(e.children) == 2 and e.children[1].start >= 0:
            return " ".join(self.text[e.children[1].start : e.children[1].end].lower().split()) == "interval"
        if e.cls != "FUNCTION" or len(e.name) != 1 or not e.children:
            return False
        name, kids = e.name[0], e.children
        if name in ("+", "-"):
            return all(self.interval(k) for k in kids)
        if name == "*" and len(kids) == 2:
            return self.interval(kids[0]) != self.interval(kids[1])
        if name == "/" and len(kids) == 2:
            return self.interval(kids[0]) and not self.interval(kids[1])
        return name in (FLOAT_CHECK, INTERVAL_DIV, INTERVAL_MUL) and self.interval(kids[0])

    def kids(self, e: Expression) -> list[Expression]:
        return _kids(e)  # (its FILTER and ORDER BY too)

    def rule(self, e: Expression) -> str | None:
        if e.cls == "FUNCTION" and len(e.name) == 1 and len(e.children) == 2 and e.name[0] in ("*", "/") \
                and self.interval(e):
            a, b = e.children
            iv, number = (b, a) if e.name[0] == "*" and self.interval(b) else (a, b)
            fn = INTERVAL_MUL if e.name[0] == "*" else INTERVAL_DIV
            return f"{fn}({self.render(iv)}, CAST({self.render(number)} AS DOUBLE))"
        if e.cls == "FUNCTION" and e.name == (FLOAT_CHECK,) and e.children and self.interval(e.children[0]):
            return self.render(e.children[0])  # (a product of an interval is no float)
        if e.cls in ("FUNCTION", "WINDOW") and len(e.name) == 1 and e.name[0].lower() in ("sum", "avg"):
            return self.sum(e)
        if e.cls == "FUNCTION" and e.name == (PERCENTILE_CONT,) and len(_arguments(e)) == 1:
            return self.percentile(e)
        return None

    def sum(self, e: Expression) -> str | None:
        # sum(x) / avg(x) of an interval: three sums of its parts (each with the call's own
        # FILTER and OVER, which the call's text after the argument holds)
        args = _arguments(e) if e.cls == "FUNCTION" else [
            c for c in window_arguments(e, [c for c in e.children if c.start >= 0], self.text)
            if not _FILTER.search(self.text, e.start, c.start)]  # (a window's FILTER is a child)
        if len(args) != 1 or args[0].start < 0:
            return None
        arg = args[0]
        x = arg.children[0] if arg.cls == "FUNCTION" and arg.name in ((SUM_ARGUMENT,), (NOT_INTERVAL,)) \
            and len(arg.children) == 1 else arg
        if not self.interval(x):
            return None
        f = e.name[0].lower()
        if e.distinct or _DISTINCT.search(self.text, e.start, arg.start):
            raise UnsupportedSQL(_DISTINCT_REFUSAL.format(f=f))
        value = self.render(x)
        if self.text[e.start : e.start + len(f)].lower() != f:  # (the name as written, then its call)
            return None
        sums = ["sum" + self.spliced(e, {id(arg): f"{part}({value})"})[len(f) :] for part in INTERVAL_PARTS]
        total = f"{INTERVAL_OF_SUMS}({', '.join(sums)})"
        if f == "sum":
            return total
        count = "count" + self.spliced(e, {id(arg): value})[len(f) :]  # (interval_avg: the sum / the count)
        return f"{INTERVAL_DIV}({total}, CAST({count} AS DOUBLE))"

    def percentile(self, e: Expression) -> str | None:
        # translate's wrapper of percentile_cont(f) WITHIN GROUP (ORDER BY x), FILTER after it
        inner = _arguments(e)[0]
        if inner.cls != "FUNCTION" or len(_arguments(inner)) != 2 or len(inner.order_by) != 1:
            return None
        x, fraction = _arguments(inner)
        if not self.interval(x):
            return None
        if (fraction.cls == "OPERATOR" and "ARRAY" in fraction.type) or "[" in self.text[fraction.start : fraction.end]:
            raise UnsupportedSQL(_ARRAY_FRACTIONS)
        close = self.text.index(")", inner.end)  # (the wrapper's; its FILTER after it)
        tail = splice(self.text, [] if e.filter is None else [(e.filter.start, e.filter.end, self.render(e.filter))],
                      close + 1, e.end)
        descending = "true" if inner.order_by[0].direction == "DESCENDING" else "false"
        if inner.filter is not None:  # (translate's wrapper may hold the FILTER or be under it)
            tail = f" FILTER (WHERE {self.render(inner.filter)}){tail}"
        return (f"{INTERVAL_PERCENTILE_CONT}(list({self.render(x)}){tail}, CAST({self.render(fraction)} AS DOUBLE), "
                f"{descending})")


def _arguments(e: Expression) -> list[Expression]:
    # a call's own arguments: its children but its FILTER (which the tree lists among them)
    f = (e.filter.start, e.filter.end) if e.filter is not None else None
    return [c for c in e.children if (c.start, c.end) != f]


def _kids(e: Expression) -> list[Expression]:
    # every expression directly below ``e`` in its text: children, FILTER, an ORDER BY's
    # expressions
    out = [*e.children]
    if e.filter is not None and all(e.filter is not k for k in out):
        out.append(e.filter)
    out += [o.expression for o in e.order_by if all(o.expression is not k for k in out)]
    return [k for k in out if k.start >= 0]
