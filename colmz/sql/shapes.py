"""Shapes: one DuckDB parse per statement shape, remapped to each text of that shape.

A workload resends a statement with new literal values (``INSERT ... VALUES (5, 'x')``,
``WHERE k = 5``). DuckDB's parse of such a text (:func:`colmz.sql.tree.parse_tree`) is its
cost; its tree differs from the tree of another text of the same shape only in positions
and in the constants' texts. A text's
*shape* is the text with its *variable tokens* -- literals and comments, as
``duckdb.tokenize`` (the lexer DuckDB's parser runs) finds them -- replaced by their form;
the text between them is kept as written:

* a number or a plain ``'...'`` string by its form (``i``: up to 9 digits, ``I``: 10 to 18
  digits, ``d``: a decimal point, ``e``: an exponent; ``'``: a plain string);
* a literal of another form (``E'...'``, ``$$...$$``, ``x'..'``, ``0x1F``, ``1_000``, a
  19-digit number) as written;
* a comment by nothing (the parser skips it).

The first text of a shape is parsed by DuckDB and becomes the shape's *template*: its tree,
its variable tokens and, for each literal token, the constant node holding it (its
*claim*): a constant placed on the token (with only ``-``, ``+``, parentheses and spaces
beside it), or a constant without position (``DATE '...'``'s) under a node whose span holds
that token and no other unclaimed one. The constant's text must be the literal's value as DuckDB reads
it (a number as written, a string without its quotes, ``''`` read as ``'``) with at most
a ``-`` before it. A literal token that no constant claims so (a table name written as a
string, a number of a parameter ``$1``) is *pinned*: its text is part of the shape's key.

A later text of the shape gets the template's tree with every offset moved as the variable
token before it moved (the text between two variable tokens is one in both) and every
claimed constant's text replaced by the new literal's value -- nodes whose subtree holds
nothing that moved or changed are shared with the template. Invariants:

* A template serves a text only after it was *confirmed*: the second text of its shape is
  parsed by DuckDB too and must equal the template remapped to it (else the shape is
  never remapped again; each text of it is parsed). What is remapped is what DuckDB gives.
* No offset of a template lies inside a variable token (else the shape is not kept).
* Texts longer than :data:`colmz.sql.tokens.CACHED_CHARS` have no shape (run once, not
  held); at most :data:`MAX_SHAPES` shapes are held (least recently used go first).

>>> shape_of("SELECT * FROM t WHERE k = 5").key == shape_of("SELECT * FROM t WHERE k = 42").key
True
>>> shape_of("SELECT * FROM t WHERE k = 5").key == shape_of("SELECT * FROM t WHERE k = 'a'").key
False
"""

from __future__ import annotations

import bisect
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

from colmz.sql.grammar import duckdb_lexed
from colmz.sql.tokens import CACHED_CHARS
from colmz.sql.tree import Expression, Literal, Modifier, Order, Query, Table, Window

__all__ = ["MAX_SHAPES", "Shape", "cached_tree", "clear_shapes", "remap_tree", "remember", "shape_of",
           "shapes_held"]

#: How many shapes are held.
MAX_SHAPES = 1024

#: PostgreSQL's whitespace (``scan.l``: space, tab, newline, carriage return, form feed,
#: vertical tab); a line break is ``\n`` or ``\r``.
_WS = " \t\n\r\f\v"
#: Number forms whose constant DuckDB reads with the same kind whatever the digits.
_NUMBER = re.compile(r"(?P<i>\d{1,9})|(?P<I>\d{10,18})|(?P<d>\d{1,18}\.\d{0,18}|\.\d{1,18})"
                     r"|(?P<e>(?:\d{1,18}\.?\d{0,18}|\.\d{1,18})[eE][+-]?\d{1,3})")
_PLAIN_STRING = re.compile(r"'(?:[^']|'')*'")
#: Tokens that may stand beside a literal inside its constant's span (``-5``, ``-(5)``).
_BESIDE = frozenset("-+()" + _WS)


@dataclass(frozen=True, slots=True)
class Shape:
    """A text's shape: ``key`` (see the module); the *variable tokens* (literals and
    comments), each with its ``starts``, ``ends`` (in characters) and ``texts``; ``slots``
    (the variable tokens that are abstracted literals, in order) and ``values`` (each
    abstracted literal's value: a number as written, a string unquoted)."""

    key: tuple[str, ...]
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    texts: tuple[str, ...]
    slots: tuple[int, ...]
    values: tuple[str, ...]


def shape_of(text: str) -> Shape | None:
    """The shape of ``text``, or ``None`` when it has none (too long for the caches).

    >>> s = shape_of("SELECT -5 /* c */, 'it''s' FROM t")
    >>> s.key, s.texts, s.values
    (('SELECT -', '#i', ' ', 'c', ', ', "'", ' FROM t'), ('5', '/* c */', "'it''s'"), ('5', "it's"))
    """
    if len(text) > CACHED_CHARS:
        return None
    try:
        kinds, offsets, tokens = duckdb_lexed(text)
    except Exception:  # noqa: BLE001 - a text DuckDB's lexer refuses has no shape (its parse says why)
        return None
    key: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    texts: list[str] = []
    slots: list[int] = []
    values: list[str] = []
    at = 0
    for kind, s, tok in zip(kinds, offsets, tokens):
        if kind != "n" and kind != "s" and kind != "c":
            continue
        key.append(text[at:s])
        if kind == "n":
            m = _NUMBER.fullmatch(tok)
            form = "=" + tok if m is None else "#" + m.lastgroup
        elif kind == "s":
            form = "'" if _PLAIN_STRING.fullmatch(tok) else "=" + tok
        else:
            form = "c"
        if form[0] in "#'":
            slots.append(len(starts))
            values.append(tok if kind == "n" else tok[1:-1].replace("''", "'"))
        key.append(form)
        starts.append(s)
        ends.append(s + len(tok))
        texts.append(tok)
        at = s + len(tok)
    key.append(text[at:])
    return Shape(tuple(key), tuple(starts), tuple(ends), tuple(texts), tuple(slots), tuple(values))


# ---------------------------------------------------------------------------- templates


class _Template:
    """A shape's first tree, what each literal token's constant is, and whether a second
    text of the shape confirmed it."""

    __slots__ = ("claims", "confirmed", "hi", "offsets", "segments", "shape", "tree")

    def __init__(self, shape: Shape, tree: tuple[Query, ...],
                 claims: dict[int, tuple[list[tuple[int, Expression]], str]], hi: dict[int, int],
                 offsets: list[int]) -> None:
        self.shape = shape
        self.tree = tree
        #: slot number -> ([(id of a constant node, the node), ...], the text before its value)
        self.claims = claims
        #: id of each node -> the largest offset (or claimed literal start) under it
        self.hi = hi
        #: every offset of the tree, and how many variable tokens end at or before it
        self.offsets = offsets
        self.segments = [bisect.bisect_right(shape.ends, o) for o in offsets]
        self.confirmed = False


def _kids(node) -> list:
    """The nodes right under ``node`` (a query, table, modifier, order or expression), ``None``
    where a field is empty. A ``VALUES`` list's rows are its ``expressions``."""
    if isinstance(node, Expression):
        return [*node.children, node.filter, *node.order_by, node.subquery,
                *(node.over.orders if node.over is not None else ())]
    if isinstance(node, Table):
        return [*node.children, *node.expressions, node.subquery]
    if isinstance(node, Query):
        return [*node.items, node.from_, node.where, *node.group_by, node.having, node.qualify,
                *node.modifiers, *(q for _, q in node.ctes), *node.children]
    if isinstance(node, Modifier):
        return [*node.expressions, *node.orders, node.limit, node.offset]
    return [node.expression]  # Order


def _nodes(tree: tuple[Query, ...]):
    """Every node of ``tree`` (queries, tables, modifiers, orders, expressions) with the
    span of its nearest positioned expression or table ancestor (itself included)."""
    stack: list = [(q, (-1, -1)) for q in reversed(tree)]
    while stack:
        node, span = stack.pop()
        yield node, span
        own = (node.start, node.end) if isinstance(node, (Expression, Table)) and node.start >= 0 else span
        stack.extend((k, own) for k in reversed(_kids(node)) if k is not None)


def _template(shape: Shape, tree: tuple[Query, ...], text: str) -> _Template | None:
    """The template of ``tree`` (DuckDB's parse of a text of ``shape``), or ``None`` when an
    offset of it lies inside a variable token."""
    slot_starts = [shape.starts[i] for i in shape.slots]
    nodes = list(_nodes(tree))
    offsets = sorted({o for node, _ in nodes if isinstance(node, (Expression, Table))
                      for o in (node.start, node.end) if o >= 0})
    for o in offsets:
        j = bisect.bisect_right(shape.starts, o) - 1
        if j >= 0 and o < shape.ends[j] and o != shape.starts[j]:
            return None
    # slot -> the constant nodes holding it, and the text before its value in them. Several
    # nodes may be one constant: DuckDB's JSON repeats an ORDER BY item (the modifier's
    # expressions and its orders), each read into a node of its own.
    claims: dict[int, tuple[list[tuple[int, Expression]], str]] = {}
    owner: dict[int, object] = {}  # slot -> what holds it: a constant's span, or None for several
    later: list[tuple[Expression, tuple[int, int]]] = []

    def claim(e: Expression, k: int, where: object) -> None:
        if owner.setdefault(k, where) != where:
            owner[k] = None
            return
        value = shape.values[k]
        text = e.literal.text
        prefix = text[: len(text) - len(value)] if text.endswith(value) else None
        if prefix not in ("", "-") or claims.get(k, ([], prefix))[1] != prefix:
            owner[k] = None
            return
        claims.setdefault(k, ([], prefix))[0].append((id(e), e))

    def inside(lo: int, hi: int) -> range:
        return range(bisect.bisect_left(slot_starts, lo), bisect.bisect_left(slot_starts, hi))

    for node, span in nodes:
        if not isinstance(node, Expression) or node.literal is None:
            continue
        if node.start < 0:
            later.append((node, span))
            continue
        ks = inside(node.start, node.end)
        # its span: one variable token, a literal, the rest signs, parentheses and spaces
        toks = range(bisect.bisect_left(shape.starts, node.start), bisect.bisect_left(shape.starts, node.end))
        if len(ks) == 1 and list(toks) == [shape.slots[ks[0]]] and not (
                set(text[node.start : shape.starts[toks[0]]] + text[shape.ends[toks[0]] : node.end])
                - _BESIDE):
            claim(node, ks[0], (node.start, node.end))
        else:
            for k in ks:
                owner[k] = None  # a constant of several literals: pinned
    positioned = set(owner)
    for node, span in later:
        if span[0] < 0:
            continue
        free = [k for k in inside(*span) if k not in positioned]
        if len(free) == 1:
            claim(node, free[0], span)
    for k, o in owner.items():
        if o is None:
            claims.pop(k, None)
    hi: dict[int, int] = {}
    by_id = {i: k for k, (nodes_, _) in claims.items() for i, _ in nodes_}

    def high(node) -> int:
        # the largest offset under ``node`` (a claimed constant without position: its literal's)
        m = node.end if isinstance(node, (Expression, Table)) else -1
        if id(node) in by_id:
            m = max(m, slot_starts[by_id[id(node)]])
        for c in _kids(node):
            if c is not None:
                m = max(m, high(c))
        hi[id(node)] = m
        return m

    for q in tree:
        high(q)
    return _Template(shape, tree, claims, hi, offsets)


class Remap:
    """Rebuilds a template's tree for a new text: offsets through ``moved``, the claimed
    constants' literals through ``literals``; a node whose largest offset is below ``lo``
    is the template's own."""

    __slots__ = ("hi", "literals", "lo", "memo", "moved")

    def __init__(self, moved: dict[int, int], literals: dict[int, Literal], hi: dict[int, int], lo: int) -> None:
        self.moved = moved
        self.literals = literals
        self.hi = hi
        self.lo = lo
        self.memo: dict[int, Expression] = {}

    def expression(self, e: Expression | None) -> Expression | None:
        if e is None:
            return None
        k = id(e)
        if self.hi[k] < self.lo:
            return e
        out = self.memo.get(k)
        if out is None:
            x = self.expression
            m = self.moved
            out = Expression(e.cls, e.type, m[e.start], m[e.end], tuple([x(c) for c in e.children]), e.name,
                             e.alias, self.query(e.subquery), self.literals.get(k, e.literal), e.distinct,
                             x(e.filter), tuple([self.order(o) for o in e.order_by]), e.relation,
                             e.star_modified, self.window(e.over))
            self.memo[k] = out
        return out

    def window(self, w: Window | None) -> Window | None:
        if w is None:
            return None
        return Window(tuple([self.expression(p) for p in w.partitions]), tuple([self.order(o) for o in w.orders]),
                      w.start, w.end, w.exclude, w.ignore_nulls)

    def order(self, o: Order) -> Order:
        if self.hi[id(o)] < self.lo:
            return o
        return Order(self.expression(o.expression), o.direction, o.nulls)

    def table(self, t: Table | None) -> Table | None:
        if t is None or self.hi[id(t)] < self.lo:
            return t
        x = self.expression
        m = self.moved
        rows = tuple([tuple([x(e) for e in r]) for r in t.rows])
        return Table(t.type, m[t.start], m[t.end], t.name, t.alias, tuple([self.table(c) for c in t.children]),
                     tuple([x(e) for e in t.expressions]), self.query(t.subquery), t.join_type, t.ref_type,
                     t.implicit, t.using, t.column_aliases, rows, t.modified)

    def modifier(self, d: Modifier) -> Modifier:
        if self.hi[id(d)] < self.lo:
            return d
        x = self.expression
        return Modifier(d.type, tuple([x(e) for e in d.expressions]), tuple([self.order(o) for o in d.orders]),
                        x(d.limit), x(d.offset))

    def query(self, q: Query | None) -> Query | None:
        if q is None or self.hi[id(q)] < self.lo:
            return q
        x = self.expression
        return Query(q.type, tuple([x(e) for e in q.items]), self.table(q.from_), x(q.where),
                     tuple([x(e) for e in q.group_by]), x(q.having), x(q.qualify),
                     tuple([self.modifier(d) for d in q.modifiers]),
                     tuple([(n, self.query(c)) for n, c in q.ctes]), tuple([self.query(c) for c in q.children]),
                     q.setop, q.setop_all, q.sampled, q.aggregate_handling, q.grouping_sets)


def _remapped(t: _Template, shape: Shape) -> tuple[Query, ...]:
    """``t``'s tree for the text of ``shape`` (a text of its shape)."""
    old = t.shape
    if old.texts == shape.texts:
        return t.tree
    # the first variable token that differs: nothing before it moves or changes
    lo = old.starts[next(j for j, (a, b) in enumerate(zip(old.texts, shape.texts, strict=True)) if a != b)]
    literals: dict[int, Literal] = {}
    for k, (nodes, prefix) in t.claims.items():
        value = shape.values[k]
        if value != old.values[k]:
            for node_id, e in nodes:
                literals[node_id] = Literal(e.literal.kind, prefix + value)
    # between variable tokens the texts are one: an offset moves as the variable token
    # before it moved its end
    shifts = [0, *(n - o for o, n in zip(old.ends, shape.ends, strict=True))]
    moved = {o: o + shifts[j] for o, j in zip(t.offsets, t.segments, strict=True)}
    moved[-1] = -1
    r = Remap(moved, literals, t.hi, lo)
    return tuple([r.query(q) for q in t.tree])


def remap_tree(text: str, known: str, tree: tuple[Query, ...]) -> tuple[Query, ...] | None:
    """The tree of ``text`` made from ``tree``, DuckDB's parse of ``known``, when the two
    texts have one shape and the same pinned literals; else ``None``. What the cache does,
    without the cache and without confirmation (for tests).

    >>> from colmz.sql.tree import read_tree
    >>> got = remap_tree("SELECT 'it''s', -7", "SELECT 'a', -1", read_tree("SELECT 'a', -1"))
    >>> [e.literal for e in got[0].items]
    [Literal(kind='STRING', text="it's"), Literal(kind='INTEGER', text='-7')]
    """
    a, b = shape_of(known), shape_of(text)
    if a is None or b is None or a.key != b.key:
        return None
    t = _template(a, tree, known)
    if t is None or any(a.values[k] != b.values[k] for k in range(len(a.slots)) if k not in t.claims):
        return None
    return _remapped(t, b)


# ---------------------------------------------------------------------------- the cache

@dataclass(frozen=True, slots=True, eq=False)
class _First:
    """A shape seen once: its text and tree, its template not made yet."""

    shape: Shape
    tree: tuple[Query, ...]
    text: str


#: key -> (pinned slot numbers, {pinned values: template}), a shape seen once (:class:`_First`),
#: or ``None`` for a refused shape.
_SHAPES: OrderedDict[tuple[str, ...], tuple[tuple[int, ...], dict] | _First | None] = OrderedDict()
_LOCK = threading.Lock()
_REFUSED = None


def _pinned_values(pins: tuple[int, ...], shape: Shape) -> tuple[str, ...]:
    return tuple([shape.values[k] for k in pins])


def cached_tree(shape: Shape) -> tuple[Query, ...] | None:
    """The tree of the text of ``shape`` from a confirmed template of its shape, else
    ``None`` (the text must be parsed, then :func:`remember`)."""
    with _LOCK:
        entry = _SHAPES.get(shape.key)
        if entry is None or isinstance(entry, _First):
            return None
        _SHAPES.move_to_end(shape.key)
    pins, templates = entry
    t = templates.get(_pinned_values(pins, shape))
    if t is None or not t.confirmed:
        return None
    try:
        return _remapped(t, shape)
    except RecursionError:  # pragma: no cover - a template is only as deep as its reader read
        return None


def remember(shape: Shape, tree: tuple[Query, ...], text: str) -> None:
    """Learn from ``tree``, DuckDB's parse of the text of ``shape``: the shape's template
    when it has none, its confirmation (or refusal) when it has one not yet confirmed."""
    with _LOCK:
        entry = _SHAPES.get(shape.key, ())
    if entry is _REFUSED:
        return None
    if entry == ():
        # a first sight: kept as read; the template is made when a second text comes (a
        # text sent once costs no more than its shape's key)
        return _store(shape.key, _First(shape, tree, text))
    if isinstance(entry, _First):
        t = _made(entry.shape, entry.tree, entry.text)
        if t is None:
            return _store(shape.key, _REFUSED)
        pins = tuple(k for k in range(len(entry.shape.slots)) if k not in t.claims)
        entry = (pins, {_pinned_values(pins, entry.shape): t})
        _store(shape.key, entry)
    pins, templates = entry
    sub = _pinned_values(pins, shape)
    t = templates.get(sub)
    if t is None:
        t = _made(shape, tree, text)
        if t is not None and tuple(k for k in range(len(shape.slots)) if k not in t.claims) == pins:
            with _LOCK:
                templates[sub] = t
        return None
    if t.confirmed:
        return None
    try:
        same = _remapped(t, shape) == tree
    except RecursionError:  # pragma: no cover
        same = False
    if same:
        t.confirmed = True
    else:
        _store(shape.key, _REFUSED)
    return None


def _made(shape: Shape, tree: tuple[Query, ...], text: str) -> _Template | None:
    try:
        return _template(shape, tree, text)
    except RecursionError:  # pragma: no cover - a template is only as deep as its reader read
        return None


def _store(key: tuple[str, ...], entry) -> None:
    with _LOCK:
        _SHAPES[key] = entry
        _SHAPES.move_to_end(key)
        while len(_SHAPES) > MAX_SHAPES:
            _SHAPES.popitem(last=False)


def shapes_held() -> int:
    """How many shapes are held (refused ones included)."""
    return len(_SHAPES)


def clear_shapes() -> None:
    """Forget every shape (:func:`colmz.sql.clear_caches`)."""
    with _LOCK:
        _SHAPES.clear()
