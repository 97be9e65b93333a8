"""Window functions for ``colmz.dataflow.plan``: :class:`WindowLowering`.

Design
------
A mixin of the planner (``colmz.dataflow.plan``'s ``_Planner``): window functions and the
select items around them as a ``Window`` node recomputed per affected partition (the
columns every window's ``PARTITION BY`` names), named windows (``WINDOW w AS (...)``)
read from the text.
"""

from __future__ import annotations

from colmz.dataflow.plan_binding import (
    Scope,
    Unsupported,
)
from colmz.dataflow.plan_nodes import (
    Node,
    Window,
)
from colmz.dataflow.recompute import INPUT_RELATION, output_schema
from colmz.sql.build import identifier
from colmz.sql.hints import select_offset
from colmz.sql.tokens import closing, tokenize
from colmz.sql.tree import Expression, Query

__all__ = ["WindowLowering"]


class WindowLowering:
    """The planner's window functions."""

    def window_clause(self, q: Query) -> tuple[int, int, dict[str, tuple[int, int]]] | None:
        """``SELECT`` ``q``'s ``WINDOW`` clause: the span of its definitions and each named
        window's span (``name AS (spec)``: the spec with its parentheses); ``None`` without one."""
        at = self.select_at(q)
        if at < 0:
            return None
        toks = tokenize(self.text)
        for i, t in enumerate(toks):
            if t.kind == "word" and t.upper == "WINDOW" and t.start > at and select_offset(toks, i) == at:
                break
        else:
            return None
        named, j = {}, i + 1
        while j + 2 < len(toks) and toks[j + 1].upper == "AS" and toks[j + 2].text == "(":
            close = closing(toks, j + 2)
            if close < 0:
                return None
            named[toks[j].name] = (toks[j + 2].start, toks[close].end)
            j = close + 1
            if j < len(toks) and toks[j].text == ",":
                j += 1
            else:
                break
        if not named:
            return None
        return toks[i + 1].start, toks[j - 1].end, named

    def window(self, q: Query, node: Node, scope: Scope) -> tuple[Node, list[tuple[str, str]]]:
        """Window functions: the select items needing SQL computed by DuckDB per affected
        partition -- the columns every window's ``PARTITION BY`` names (Materialize's basic
        plan for window functions). Named windows (``OVER w``, ``WINDOW w AS (...)``): the
        named spec's ``PARTITION BY``, and the query's ``WINDOW`` clause -- its column
        references read from the input -- appended to the SQL DuckDB runs; a spec naming a
        window and adding to it (``OVER (w ROWS ...)``) is one partition (coarser, still exact)."""
        select, items, texts = [], [], []
        key: list[str] | None = None
        clause = self.window_clause(q)
        self.named_windows = clause
        try:
            return self.window_items(q, node, scope, clause, select, items, texts, key)
        finally:
            self.named_windows = None

    def window_items(self, q, node, scope, clause, select, items, texts, key):
        for e in q.items:
            if e.cls == "STAR":
                if e.star_modified:
                    raise Unsupported(f"{self.span(e)!r} (EXCLUDE/REPLACE/RENAME/COLUMNS)")
                select.extend((p, n) for n, p in scope.star(e.relation))
                continue
            if e.cls == "COLUMN_REF":
                select.append((scope.column(e), e.alias or e.name[-1]))
                continue
            for w in e.walk():
                if w.cls == "WINDOW":
                    part = self.partition_columns(w, scope)
                    key = part if key is None else [c for c in key if c in part]
            name = self.fresh("w")
            items.append((name, self.span(e)))
            texts.append(f"{self.recompute_text(e, scope.column)} AS {identifier(name)}")
            select.append((name, self.item_name(e)))
        key = key or []
        sql = f"SELECT *, {', '.join(texts)} FROM {INPUT_RELATION}"
        if clause is not None:
            # the named windows' definitions, their column references read from the input
            refs = {}
            for e in q.items:
                for sub in e.walk():
                    if sub.cls == "COLUMN_REF" and clause[0] <= sub.start and sub.end <= clause[1]:
                        refs[(sub.start, sub.end)] = scope.column(sub)
            out, at = [], clause[0]
            for (start, end), col in sorted(refs.items()):
                out += [self.text[at:start], identifier(col)]
                at = end
            out.append(self.text[at:clause[1]])
            sql += " WINDOW " + "".join(out)
        translated = self.checked_sql(sql, node.schema, key, "window functions")
        schema = output_schema(node.schema, translated)
        return Window(schema, node, tuple(key), tuple(items), translated), select

    def partition_columns(self, w: Expression, scope: Scope) -> list[str]:
        """The columns of a window's ``PARTITION BY`` (each must be a column)."""
        text = self.text[w.start:w.end]
        toks = tokenize(text)
        over = next((i for i, t in enumerate(toks) if t.kind == "word" and t.text.upper() == "OVER"), None)
        base = w.start
        if (over is not None and over + 2 == len(toks) and toks[over + 1].kind in ("word", "qident")
                and self.named_windows is not None and toks[over + 1].name in self.named_windows[2]):
            # OVER name: the spec of the query's WINDOW clause (DuckDB copied it into the call)
            base, end = self.named_windows[2][toks[over + 1].name]
            text = self.text[base:end]
            toks = (None, *tokenize(text))  # toks[over + 1] is the spec's "("
            over = 0
        elif over is None or over + 1 >= len(toks) or toks[over + 1].text != "(":
            raise Unsupported(f"window {self.span(w)!r}: a named window")
        lo = hi = None
        depth = 0
        for i in range(over + 1, len(toks)):
            t = toks[i]
            if t.text == "(":
                depth += 1
            elif t.text == ")":
                depth -= 1
                if depth == 0:
                    hi = hi if hi is not None else (t.start if lo is not None else None)
                    break
            elif depth == 1 and t.kind == "word":
                word = t.text.upper()
                if word == "PARTITION" and i + 1 < len(toks) and toks[i + 1].text.upper() == "BY":
                    lo = toks[i + 1].end
                elif lo is not None and hi is None and word in ("ORDER", "ROWS", "RANGE", "GROUPS"):
                    hi = t.start
        if lo is None:
            return []
        cols = []
        for c in w.children:
            if c.start >= 0 and base + lo <= c.start and c.end <= base + hi:
                if c.cls != "COLUMN_REF":
                    raise Unsupported(f"window {self.span(w)!r}: PARTITION BY an expression")
                cols.append(scope.column(c))
        return cols

    # ---- subqueries in WHERE: semijoins and antijoins (plan39)
