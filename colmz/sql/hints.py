"""Query hints: Materialize's ``OPTIONS (...)`` clause of a ``SELECT``, read off the tokens.

Materialize lets a ``SELECT`` say how large its groups are expected to be, after its
``GROUP BY`` (before ``HAVING``)::

    SELECT k, min(v) FROM t GROUP BY k OPTIONS (AGGREGATE INPUT GROUP SIZE = 1000)

The hints are :data:`HINTS`: ``AGGREGATE INPUT GROUP SIZE`` (the min/max reduce's
hierarchical plan, bucketed for groups of that size), ``DISTINCT ON INPUT GROUP SIZE`` (a
``DISTINCT ON``'s top-k) and ``LIMIT INPUT GROUP SIZE`` (an ``ORDER BY ... LIMIT``'s
top-k); each takes a positive integer. They change how a view is maintained, never what it
holds.

DuckDB's parser does not know the clause. :func:`strip_hints` finds each one on the tokens
and returns the text with the clause *blanked* -- every character of ``OPTIONS (...)``
replaced by a space, so every other offset in the text is unchanged (the planner's spans,
sliced from the user's text, stay right) -- and the hints read from it, each with the
offset of the ``SELECT`` keyword of the query it belongs to (the nearest ``SELECT`` before
it at its parenthesis level). :func:`colmz.sql.translate` blanks them first, so every query
DuckDB runs (the recompute path, ad-hoc queries) ignores them; ``colmz.dataflow.plan``
reads them.

Recognised: the word ``OPTIONS`` (unquoted) followed by ``(`` whose first words are a hint's
name, or which holds ``name = value`` items, and not following ``,``, ``.`` or an operator
(a call of a function named ``options`` stays one). A clause naming an unknown hint, a value
that is not a positive integer, or a hint given twice raises :class:`InvalidHint` naming it.

>>> text, hints = strip_hints("SELECT k, min(v) FROM t GROUP BY k OPTIONS (AGGREGATE INPUT GROUP SIZE = 100)")
>>> text.rstrip(), hints
('SELECT k, min(v) FROM t GROUP BY k', (QueryHint(name='AGGREGATE INPUT GROUP SIZE', value=100, select_at=0),))
"""

from __future__ import annotations

from dataclasses import dataclass

from colmz.sql.build import splice
from colmz.sql.errors import SQLError
from colmz.sql.tokens import Token, bracket_pairs, closing, tokenize, top_level

__all__ = ["HINTS", "InvalidHint", "QueryHint", "blank_hints", "option_items", "select_offset", "strip_hints"]

#: The hints colmz reads (Materialize's query hints), each a positive integer.
HINTS = ("AGGREGATE INPUT GROUP SIZE", "DISTINCT ON INPUT GROUP SIZE", "LIMIT INPUT GROUP SIZE")

#: Words after which ``options (`` is an expression (a function call), not the clause.
_EXPRESSION_BEFORE = frozenset({"SELECT", "DISTINCT", "ALL", "BY", "ON", "WHERE", "HAVING", "AND", "OR", "NOT",
                                "WHEN", "THEN", "ELSE", "CASE", "IN", "IS", "LIKE", "ILIKE", "BETWEEN",
                                "RETURN", "AS", "USING", "FROM", "JOIN", "LATERAL", "ANY", "SOME", "EXISTS"})


class InvalidHint(SQLError):
    """An ``OPTIONS (...)`` clause naming an unknown hint, a value that is not a positive
    integer, or a hint given twice."""


@dataclass(frozen=True)
class QueryHint:
    """One hint: its name (one of :data:`HINTS`), its value, and the character offset of the
    ``SELECT`` keyword of the query it belongs to (``-1``: none before it)."""

    name: str
    value: int
    select_at: int


def _is_clause(toks: tuple[Token, ...], i: int) -> bool:
    t = toks[i]
    if t.kind != "word" or t.upper != "OPTIONS" or i + 1 >= len(toks) or toks[i + 1].text != "(" or i == 0:
        return False
    prev = toks[i - 1]
    if prev.kind == "op" and prev.text != ")":
        return False
    if prev.kind == "word" and prev.upper in _EXPRESSION_BEFORE:
        return False
    close = closing(toks, i + 1)
    inner = toks[i + 2:close] if close > 0 else ()
    words = " ".join(x.upper for x in inner[:5] if x.kind == "word")
    return any(words.startswith(h) for h in HINTS) or any(x.text == "=" for x in inner)


def select_offset(toks: tuple[Token, ...], i: int) -> int:
    """The offset of the ``SELECT`` keyword of the query holding token ``i``: the nearest
    one before it at its parenthesis level (``-1``: none), parenthesised groups passed over
    whole (:func:`colmz.sql.tokens.bracket_pairs`)."""
    pairs = bracket_pairs(toks)
    j = i - 1
    while j >= 0:
        t = toks[j]
        if t.kind == "op" and t.text in "()":
            if t.text == "(" or pairs[j] < 0:
                return -1  # the parenthesis holding token i, or a ")" opened nowhere before
            j = pairs[j]
        elif t.kind == "word" and t.upper == "SELECT":
            return t.start
        j -= 1
    return -1


def option_items(text: str, toks: tuple[Token, ...], lo: int, hi: int,
                 names: tuple[str, ...]) -> list[tuple[str | None, bool, tuple[Token, ...], str]]:
    """The items of an option list ``NAME [=] value, ...`` in ``toks[lo:hi]``, as Materialize
    writes both its statements' ``WITH (...)`` options and its query hints: for each item,
    the first of ``names`` (upper-case words) its leading words spell (``None``: none),
    whether ``=`` follows the name, the value's tokens (after the ``=``) and the item's text.

    >>> text = "SNAPSHOT = false, PROGRESS, FOO 1"
    >>> [(n, eq, [t.text for t in v], s) for n, eq, v, s in
    ...  option_items(text, tokenize(text), 0, 8, ("SNAPSHOT", "PROGRESS"))]
    [('SNAPSHOT', True, ['false'], 'SNAPSHOT = false'), ('PROGRESS', False, [], 'PROGRESS'), (None, False, [], 'FOO 1')]
    """
    cuts = [j for j in top_level(toks, lo, hi) if toks[j].kind == "op" and toks[j].text == ","]
    out = []
    for a, b in zip([lo, *(j + 1 for j in cuts)], [*cuts, hi]):
        item = toks[a:b]
        written = text[item[0].start:item[-1].end] if item else ""
        words = [x.upper if x.kind == "word" else None for x in item]
        name = next((n for n in names if words[:len(n.split())] == n.split()), None)
        rest = item[len(name.split()):] if name is not None else ()
        eq = bool(rest) and rest[0].kind == "op" and rest[0].text == "="
        out.append((name, eq, rest[1:] if eq else rest, written))
    return out


def _items(text: str, toks: tuple[Token, ...], lo: int, hi: int, select_at: int) -> list[QueryHint]:
    clause = text[toks[lo - 2].start:toks[hi].end]
    out: list[QueryHint] = []
    for name, eq, value, got in option_items(text, toks, lo, hi, HINTS):
        if name is None or (value and not eq):
            raise InvalidHint(f"{clause}: unknown query hint {got!r} (colmz reads {', '.join(HINTS)})")
        written = text[value[0].start:value[-1].end] if value else ""
        if len(value) != 1 or value[0].kind != "number" or not value[0].text.isdigit() or int(value[0].text) < 1:
            raise InvalidHint(f"{clause}: {name} takes a positive integer, got {written or 'nothing'!r}")
        if any(h.name == name for h in out):
            raise InvalidHint(f"{clause}: {name} is given twice")
        out.append(QueryHint(name, int(value[0].text), select_at))
    return out


def strip_hints(text: str) -> tuple[str, tuple[QueryHint, ...]]:
    """``text`` with every ``OPTIONS (...)`` clause blanked (same length, same offsets) and
    the hints read from them (module docstring). :class:`InvalidHint` for a bad clause.

    >>> strip_hints("SELECT options(x) FROM t")
    ('SELECT options(x) FROM t', ())
    >>> strip_hints("SELECT k FROM t GROUP BY k OPTIONS (AGGREGATE INPUT GROUP SIZE = 'many')")
    Traceback (most recent call last):
    ...
    colmz.sql.hints.InvalidHint: OPTIONS (AGGREGATE INPUT GROUP SIZE = 'many'): AGGREGATE INPUT GROUP SIZE takes a positive integer, got "'many'"
    """
    if "options" not in text.lower():  # the common case, without tokenizing
        return text, ()
    toks = tokenize(text)
    edits, hints = [], []
    for i in range(len(toks)):
        if not _is_clause(toks, i):
            continue
        close = closing(toks, i + 1)
        if close < 0:
            raise SQLError("OPTIONS (: unclosed parenthesis")
        at = select_offset(toks, i)
        found = _items(text, toks, i + 2, close, at)
        for h in found:
            if any(x.name == h.name and x.select_at == at for x in hints):
                raise InvalidHint(f"OPTIONS: {h.name} is given twice for one SELECT")
        hints.extend(found)
        start, end = toks[i].start, toks[close].end
        # blanked, newlines kept: every offset (and line) of the rest is unchanged
        edits.append((start, end, "".join(c if c in "\n\r" else " " for c in text[start:end])))
    if not edits:
        return text, ()
    return splice(text, edits), tuple(hints)


def blank_hints(text: str) -> str:
    """``text`` with its ``OPTIONS (...)`` clauses blanked (:func:`strip_hints`): what DuckDB
    runs, the hints ignored."""
    return strip_hints(text)[0]
