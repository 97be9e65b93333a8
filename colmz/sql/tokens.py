"""Tokens: SQL text split once into strings, names, numbers and operators.

The tokenizer knows strings (``'...'`` with ``''``, ``E'...'``, dollar quotes), quoted
identifiers, numbers, comments and operators, so a ``;`` or a keyword inside a string is
never taken for structure; bare identifiers fold to lower case, as in PostgreSQL. Each
distinct text of up to :data:`CACHED_CHARS` characters is tokenized once (an LRU cache
keyed by the text): the parser, the translation, :func:`colmz.sql.bind_relations` and the
builder's checks all read the same token tuple; a longer text is not held.

Comments and whitespace are read as DuckDB's lexer (PostgreSQL's ``scan.l``) reads them,
so every token-level rule sees the text DuckDB runs: block comments nest (each ``/*``
inside one opens a level, each ``*/`` closes one), a ``--`` comment ends at ``\\r`` or
``\\n``, whitespace is space, tab, ``\\n``, ``\\r``, form feed and vertical tab only (any
other character above ASCII is a letter). Whether a piece of user text is one expression
is DuckDB's own decision, :func:`colmz.sql.tree.check_expression`.
"""

from __future__ import annotations

import bisect
import functools
import inspect
import operator
import re
from collections.abc import Iterator, Sequence

from colmz.sql.errors import SQLError, UnsupportedSQL

__all__ = ["CACHED_CHARS", "MAX_NESTING", "NOT_BRACKET", "Token", "bracket_pairs", "check_balanced", "check_nesting", "closing", "cte_columns_of", "cte_definitions", "nesting_depth",
           "require_text", "scan", "share_concat", "share_edit", "share_slice", "short_text_cache", "token_name", "tokenize", "top_level"]

#: Texts up to this many characters are remembered by the caches of colmz's SQL (a query
#: re-run at every time is one); longer ones -- an INSERT of a large VALUES list, run once --
#: are worked on each time rather than held in memory.
CACHED_CHARS = 1 << 13


def short_text_cache(maxsize: int):
    """Decorator: an LRU cache of ``maxsize`` entries for calls whose first argument is a
    text of at most :data:`CACHED_CHARS` characters; longer texts are not remembered.

    >>> @short_text_cache(2)
    ... def n(text): return len(text)
    >>> n("abc"), n("x" * (CACHED_CHARS + 1)), n.cache_info().currsize
    (3, 8193, 1)
    """

    def wrap(fn):
        cached = functools.lru_cache(maxsize=maxsize)(fn)

        if fn.__code__.co_argcount == 1 and not fn.__code__.co_flags & inspect.CO_VARARGS:
            # a function of the text alone (most): called without packing arguments, which
            # a text's every reader pays on each hit
            def call(text):
                if isinstance(text, str) and len(text) <= CACHED_CHARS:
                    return cached(text)
                return fn(text)  # which refuses what is not text
        else:
            def call(text, *args):
                if isinstance(text, str) and len(text) <= CACHED_CHARS:
                    return cached(text, *args)
                return fn(text, *args)  # which refuses what is not text

        call = functools.wraps(fn)(call)

        call.cache_clear = cached.cache_clear
        call.cache_info = cached.cache_info
        return call

    return wrap

class Token:
    """One lexical token: ``kind`` is ``word``, ``qident``, ``string``, ``number``, ``op``.

    Read-only by convention (tokens are shared through :func:`tokenize`'s cache). A class
    with ``__slots__`` rather than a frozen dataclass: made about five times faster, read
    as fast -- tokenizing is most of what colmz's SQL front end spends on a new text.

    >>> Token("word", "x", 0, 1) == Token("word", "x", 0, 1), Token("op", "(", 3, 4)
    (True, Token(kind='op', text='(', start=3, end=4))
    """

    __slots__ = ("end", "kind", "start", "text", "upper")

    def __init__(self, kind: str, text: str, start: int, end: int) -> None:
        self.kind = kind
        self.text = text
        self.start = start
        self.end = end
        #: A word's text in upper case (keywords are compared so), ``""`` for other kinds:
        #: set once here, as every pass over the tokens reads it (a property would upper-case
        #: the text at each read).
        self.upper = text.upper() if kind == "word" else ""

    def _key(self) -> tuple:
        return (self.kind, self.text, self.start, self.end)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Token) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Token(kind={self.kind!r}, text={self.text!r}, start={self.start!r}, end={self.end!r})"

    @property
    def name(self) -> str:
        """The identifier this token names (bare words fold to lower case)."""
        if self.kind == "word":
            return self.text.lower()
        if self.kind == "qident":
            return self.text[1:-1].replace('""', '"')
        raise SQLError(f"expected a name, got {self.text!r}")


_OPS = sorted(
    ["::", "->>", "->", "#>>", "#>", "<=", ">=", "<>", "!=", "||", "=>", "@>", "<@", "**",
     "(", ")", ",", ";", ".", "+", "-", "*", "/", "%", "<", ">", "=", "[", "]", ":", "^",
     "&", "|", "~", "!", "?", "@", "#"],
    key=len, reverse=True,
)
#: One operator, the longest first (one regex match instead of a test per operator).
_OP = re.compile("|".join(re.escape(op) for op in _OPS))
_COMMENT_MARK = re.compile(r"/\*|\*/")
#: A bare word: as in PostgreSQL's (and DuckDB's) lexer, any character above ASCII is a letter.
_WORD = re.compile(r"[A-Za-z_\u0080-\U0010ffff][A-Za-z0-9_$\u0080-\U0010ffff]*")
_DOLLAR = re.compile(r"\$([A-Za-z_\u0080-\U0010ffff][A-Za-z0-9_\u0080-\U0010ffff]*)?\$")


def _comment_end(text: str, i: int) -> int:
    # Block comments nest, as in PostgreSQL's and DuckDB's lexers (scan.l's xc state): each
    # "/*" inside opens one more level, each "*/" closes one.
    depth = 0
    for m in _COMMENT_MARK.finditer(text, i):
        depth += 1 if m.group(0) == "/*" else -1
        if depth == 0:
            return m.end()
    raise SQLError(f"unterminated comment at offset {i}")


#: One token and the whitespace before it, as the lexer reads them: each match is
#: ``(whitespace, token, dollar tag)``, a comment being a token here too (a block comment
#: without a ``/*`` inside one match, a dollar-quoted string one match up to the first repeat
#: of its tag), and any other character a token of its own (so the matches follow each other:
#: none is passed over). The alternatives are in the order PostgreSQL's and DuckDB's lexers
#: decide (``E'`` before a word); strings and quoted names are matched possessively (an
#: unterminated one never matches a shorter prefix). Read by one ``findall``, with no
#: :class:`Match` object per token and each token's kind read from its first character
#: (:data:`_KIND_OF`), this is :func:`tokenize`'s common path; what that cannot decide alone
#: (a character no alternative takes, an unterminated quote, a nested comment) is read by
#: :func:`scan`.
_PAIRS = re.compile(
    r"([ \t\n\r\f\v]*)("
    r"--[^\r\n]*[\r\n]?"
    r"|/\*(?:[^*/]|\*(?!/)|/(?!\*))*\*/|/\*"
    r"|'(?:[^']|'')*+'|[eE]'(?:[^'\\]|\\.|'')*+'"
    r'|"(?:[^"]|"")*+"'
    r"|\$((?:" + _DOLLAR.pattern[3:-4] + r")?)\$.*?\$\3\$"
    r"|" + _WORD.pattern
    + r"|\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?"
    r"|" + _OP.pattern + r"|[^ \t\n\r\f\v])",
    re.S,
)
#: A token's kind by its first character, for every ASCII character beginning one (another
#: ASCII character is no token; one above ASCII begins a word). One-character values are
#: characters beginning tokens of two kinds or none: ``-`` (``--`` comment or operator),
#: ``/`` (``/*`` comment or operator), ``.`` (number or operator), ``e`` (``E'`` string or
#: word), ``'`` and ``$`` (a string, or alone: unterminated), ``"`` (likewise a quoted name).
_WORD_KIND, _OP_KIND, _NUMBER_KIND = "word", "op", "number"
_KIND_OF = {**{c: _OP_KIND for c in "(),;+*%<>=[]:^&|~!?@#"}, **{c: _NUMBER_KIND for c in "0123456789"},
            **{c: _WORD_KIND for c in "ABCDFGHIJKLMNOPQRSTUVWXYZabcdfghijklmnopqrstuvwxyz_"},
            "'": "'", "$": "'", '"': '"', "-": "-", "/": "/", ".": ".", "e": "e", "E": "e"}


def _tokens_at_once(text: str, start: int = 0, stop: int | None = None) -> list[Token] | None:
    # tokenize's common path (see _PAIRS) over text[start:stop], ``start`` a token's end or
    # 0; None when the text needs the careful reading.
    out: list[Token] = []
    append = out.append
    kind_of = _KIND_OF.get
    new = Token.__new__  # each token's slots set here: a third cheaper than a call of Token
    i = start
    if stop is None:
        stop = len(text)
    for space, tok, _ in _PAIRS.findall(text, start, stop):
        at = i + len(space)  # each match begins where the last ended
        i = end = at + len(tok)
        kind = kind_of(tok[0])
        # (identity tests against _KIND_OF's own strings: the common kinds decided first)
        if kind is not _WORD_KIND and kind is not _OP_KIND and kind is not _NUMBER_KIND:
            kind = _odd_kind(tok, kind, text, end)
            if kind is None:
                return None
            if not kind:
                continue  # a comment
        t = new(Token)
        t.kind = kind
        t.text = tok
        t.start = at
        t.end = end
        t.upper = tok.upper() if kind == "word" else ""  # as Token.__init__ sets it
        append(t)
    if i != start + len(text[start:stop].rstrip(" \t\n\r\f\v")):
        return None  # (cannot happen: every character but trailing whitespace is matched)
    return out


def _odd_kind(tok: str, first: str | None, text: str, end: int) -> str | None:
    # The kind of _PAIRS' token ``tok`` (ending at ``end``) whose first character is not
    # one kind alone (``first`` its _KIND_OF value): ``""`` for a comment, None for what
    # the careful reading decides (a character beginning no token, a nested or
    # unterminated comment, an unterminated string or quoted name, a lone ``$``).
    if first is None:
        return None if tok[0] < "\x80" else "word"
    if first == "-":
        return "" if tok[:2] == "--" else "op"
    if first == "/":
        if tok == "/*":
            return None
        return "" if tok[:2] == "/*" else "op"
    if first == ".":
        return "number" if len(tok) > 1 else "op"
    if first == "e":
        if len(tok) > 1 and tok[1] == "'":
            return "string"
        return None if len(tok) == 1 and text.startswith("'", end) else "word"  # (an unterminated E'...')
    if len(tok) == 1:
        return None
    return "string" if first == "'" else "qident"


#: Tokens of slices of texts already tokenized (:func:`share_slice`), each taken by the first
#: :func:`tokenize` of its text (then held by its cache); a bounded waiting room.
_SLICES: dict[str, list[Token]] = {}
#: Texts known to nest within :data:`MAX_NESTING`: slices of texts that were checked.
_SHALLOW: set[str] = set()


def _hand(text: str, toks: list[Token]) -> None:
    # ``toks``, the tokens of ``text``, left for its first tokenize (_SLICES, bounded)
    if len(_SLICES) >= 256:
        _SLICES.clear()
    _SLICES[text] = toks


def _moved(toks: Sequence[Token], delta: int, out: list[Token]) -> None:
    # ``out`` extended with copies of ``toks`` whose offsets move by ``delta`` (each
    # token's slots set here: a third cheaper than a call of Token); not moved, the same
    # tokens (read-only, shared as tokenize's cache shares them)
    if delta == 0:
        out.extend(toks)
        return
    new = Token.__new__
    for t in toks:
        c = new(Token)
        c.kind = t.kind
        c.text = t.text
        c.start = t.start + delta
        c.end = t.end + delta
        c.upper = t.upper
        out.append(c)


def share_slice(text: str, toks: Sequence[Token], a: int, b: int) -> str:
    """The text of ``toks[a:b]`` (tokens of ``text``, which :func:`check_nesting` passed),
    with its tokens handed to :func:`tokenize` and its nesting known to pass: a query cut
    from a statement is not lexed or measured again. A balanced run of whole tokens lexes
    alone as it lexed in place, and nests no deeper than the text around it.

    >>> s = "INSERT INTO t SELECT k + 1 FROM u"; toks = tokenize(s)
    >>> q = share_slice(s, toks, 3, len(toks)); q, [t.start for t in tokenize(q)][:3]
    ('SELECT k + 1 FROM u', [0, 7, 9])
    """
    if a >= b:
        return ""
    lo = toks[a].start
    sub = text[lo:toks[b - 1].end]
    if len(sub) > CACHED_CHARS or sub in _SLICES:
        return sub
    if len(_SHALLOW) >= 4096:
        _SHALLOW.clear()
    out: list[Token] = []
    _moved(toks[a:b], -lo, out)  # in place (lo 0): the same tokens (read-only, shared)
    _hand(sub, out)
    _SHALLOW.add(sub)
    return sub


#: Characters that end or begin a token whatever stands beside them (no token holds one
#: outside a string, quoted name or comment).
_SEPARATORS = frozenset("(),")
_SPACE = " \t\n\r\f\v"


def share_concat(pieces: Sequence[str]) -> str:
    """``"".join(pieces)``, with its tokens handed to :func:`tokenize`: each piece's own
    tokens (:func:`tokenize` of the piece: a user's text seen before is not lexed again),
    moved to where the piece stands. Only where every piece lexes alone as it lexes in
    place: each piece is whole tokens (nothing but whitespace after its last, so no comment
    runs on into the next piece), and two pieces meet at whitespace or at a ``(``, ``)`` or
    ``,`` on either side (no token runs across such a meeting); else nothing is handed.

    >>> q = share_concat(["SELECT * FROM t WHERE (", "k >= 1", ")"]); q, [t.start for t in tokenize(q)][-4:]
    ('SELECT * FROM t WHERE (k >= 1)', [23, 25, 28, 29])
    """
    text = "".join(pieces)
    if len(text) > CACHED_CHARS or text in _SLICES:
        return text
    out: list[Token] = []
    at = 0
    before = ""  # the last character of the text so far
    for piece in pieces:
        if not piece:
            continue
        try:
            toks = tokenize(piece)
        except SQLError:
            return text
        if piece[toks[-1].end if toks else 0:].strip(_SPACE):
            return text  # a comment after the last token (or the only one) would run on
        first = piece[0]
        if before and not (before in _SPACE or first in _SPACE or before in _SEPARATORS or first in _SEPARATORS):
            return text
        _moved(toks, at, out)
        at += len(piece)
        before = piece[-1]
    _hand(text, out)
    return text


_START = operator.attrgetter("start")
_END = operator.attrgetter("end")


def share_edit(old: str, toks: Sequence[Token], new: str) -> None:
    """Hand :func:`tokenize` the tokens of ``new``, an edit of ``old`` (whose tokens are
    ``toks``), lexing only what the edit may change: the tokens of the common beginning that
    end well before the first difference (the lexer looks at most three characters past a
    token: ``1e+``) are kept, the text is lexed from there until a token starts where one of
    ``old`` started within their common ending (from a token's start on, the lexer reads only
    what follows), and the rest are ``old``'s tokens moved by the difference in length.

    >>> old = "SELECT a FROM t WHERE x < mz_now()"; new = "SELECT a FROM t WHERE x < z"
    >>> share_edit(old, tokenize(old), new); [t.text for t in tokenize(new)][-3:]
    ['x', '<', 'z']
    """
    if len(new) > CACHED_CHARS or new in _SLICES or new == old:
        return
    lim = min(len(old), len(new))
    lo, hi = 0, lim  # the common beginning's length, by halves (slice comparisons run in C)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if old[:mid] == new[:mid]:
            lo = mid
        else:
            hi = mid - 1
    p = lo
    lo, hi = 0, lim - p  # the common ending's, not overlapping the beginning
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if old[len(old) - mid:] == new[len(new) - mid:]:
            lo = mid
        else:
            hi = mid - 1
    tail = len(old) - lo  # old[tail:] == new[tail + delta:]
    delta = len(new) - len(old)
    # token ends and starts increase: the kept beginning and the common ending by halves
    k = bisect.bisect_right(toks, p - 4, key=_END)
    first_tail = bisect.bisect_left(toks, tail, key=_START)  # old's first token in the common ending
    n_old = len(toks)
    if k + n_old - first_tail < 4:
        # (next to nothing of old's to keep: one findall over the whole text is cheaper,
        # and it is what tokenize reads first)
        got = _tokens_at_once(new)
        if got is not None:
            _hand(new, got)
        return
    out = list(toks[:k])
    i = out[-1].end if out else 0
    n = len(new)
    # Up to where old's tokens may resume (the first in the common ending), one findall
    # reads the new text; of what it reads, the tokens ending three characters or more
    # before that point are kept (the lexer looks no further past a token, so the cut did
    # not change them) and the loop below reads on from the last one kept.
    resume = toks[first_tail].start + delta if first_tail < n_old else n
    if resume - i > 16 and (got := _tokens_at_once(new, i, resume)):
        keep = bisect.bisect_right(got, resume - 4, key=_END)
        if keep:
            out += got[:keep]
            i = got[keep - 1].end
    # token by token, as tokenize reads what it cannot decide alone, until a token starts
    # where one of old's started within the common ending (anything that raises: tokenize
    # reports it)
    try:
        for t in scan(new, i):
            if t.start - delta >= tail:
                j = bisect.bisect_left(toks, t.start - delta, lo=first_tail, key=_START)
                if j < n_old and toks[j].start == t.start - delta:  # in step from here on
                    _moved(toks[j:], delta, out)
                    break
            out.append(t)
    except SQLError:
        return
    _hand(new, out)


@short_text_cache(4096)
def tokenize(text: str) -> tuple[Token, ...]:
    """Split SQL into tokens, skipping whitespace and comments.

    >>> [t.text for t in tokenize("SELECT 'a;b' -- c\\n , x::INT8")]
    ['SELECT', "'a;b'", ',', 'x', '::', 'INT8']
    """
    shared = _SLICES.pop(text, None)
    if shared is not None:
        return shared
    # One findall (the common case, _tokens_at_once); what it does not decide alone -- a
    # nested comment, a stray character, an unterminated quote -- is read one match at a
    # time, which reports errors.
    if isinstance(text, str) and (got := _tokens_at_once(text)) is not None:
        return got
    return list(scan(text))


def scan(text: str, i: int = 0) -> Iterator[Token]:
    """The tokens of ``text`` from offset ``i`` on (``i`` a token's end or 0), one match at
    a time: :func:`tokenize` without its cache and its one-pass reading of plain runs. What
    that pass leaves to it is read here: a nested comment (by its depth, then the matches
    resume after it), else the error.

    >>> [t.text for t in scan("x /* a /* b */ */ + 1")]
    ['x', '+', '1']
    """
    while (m := _PAIRS.match(text, i)) is not None:  # (none past the last token)
        tok, at, i = m.group(2), m.start(2), m.end()
        kind = _KIND_OF.get(tok[0])
        if kind is not _WORD_KIND and kind is not _OP_KIND and kind is not _NUMBER_KIND:
            kind = _odd_kind(tok, kind, text, i)
            if kind is None:
                if tok != "/*":
                    raise _lexing_error(text, at)
                i = _comment_end(text, at)
                continue
            if not kind:
                continue  # a comment
        yield Token(kind, tok, at, i)


def _lexing_error(text: str, i: int) -> SQLError:
    # Why no token begins at offset ``i``.
    c = text[i]
    if c == "'" or (c in "eE" and text.startswith("'", i + 1)):
        return SQLError(f"unterminated string starting at offset {i}")
    if c == '"':
        return SQLError(f"unterminated quoted identifier at offset {i}")
    if c == "$" and _DOLLAR.match(text, i):
        return SQLError(f"unterminated dollar-quoted string at offset {i}")
    return SQLError(f"unexpected character {c!r} at offset {i}")


_clear_tokens = tokenize.cache_clear


def _forget_tokens() -> None:
    _clear_tokens()
    _PAIRS_OF.clear()
    _SLICES.clear()
    _SHALLOW.clear()


tokenize.cache_clear = _forget_tokens


#: :func:`bracket_pairs`' entry for a token that is no bracket.
NOT_BRACKET = -2
_BRACKETS = frozenset("()[]")
#: The pairs of the token lists asked about last: id -> (the list, its pairs). Holding a
#: list keeps its id its own; token lists are read-only (tokenize's are shared through its
#: cache), so the pairs stay right. Bracket questions come in runs over one list (a pass of
#: the translation, a statement's reader): a few lists are held, not extending the life of
#: tokenize's (and holding no long text's for long).
_PAIRS_OF: dict[int, tuple[Sequence[Token], list[int]]] = {}


def bracket_pairs(toks: Sequence[Token]) -> list[int]:
    """For each token of ``toks``, the index of its partner bracket: a ``(`` or ``[`` and the
    ``)`` or ``]`` closing it pair as a stack pairs them (either kind closes either; what
    kinds must match is :func:`check_balanced`'s question), ``-1`` for a bracket without
    partner, :data:`NOT_BRACKET` for any other token. Computed once per token list (kept
    while the list is, tokens being read-only); every bracket question of colmz's SQL reads
    it.

    >>> bracket_pairs(tokenize("f(a[1]) )"))
    [-2, 6, -2, 5, -2, 3, 1, -1]
    """
    got = _PAIRS_OF.get(id(toks))
    if got is not None and got[0] is toks:
        return got[1]
    pairs = [NOT_BRACKET] * len(toks)
    stack: list[int] = []
    # (the brackets found by one comprehension, then only they visited; a token whose text
    # is a bracket is one: strings and quoted names hold their quotes)
    for i in [i for i, t in enumerate(toks) if t.text in _BRACKETS]:
        if toks[i].text in "([":
            stack.append(i)
            pairs[i] = -1
        elif stack:
            pairs[i] = j = stack.pop()
            pairs[j] = i
        else:
            pairs[i] = -1
    if len(_PAIRS_OF) >= 16:
        del _PAIRS_OF[next(iter(_PAIRS_OF))]  # the first asked about
    _PAIRS_OF[id(toks)] = (toks, pairs)
    return pairs


def closing(toks: Sequence[Token], open_at: int, end: int | None = None) -> int:
    """Index of the token closing the ``(`` or ``[`` at ``open_at`` (before ``end``); -1 when
    it is not closed (:func:`bracket_pairs`).

    >>> closing(tokenize("f(a, (b)[1]) + 2"), 1), closing(tokenize("f(a"), 1)
    (10, -1)
    """
    j = bracket_pairs(toks)[open_at]
    return j if j > open_at and (end is None or j < end) else -1


def top_level(toks: Sequence[Token], lo: int, hi: int | None = None) -> Iterator[int]:
    """Indices of the tokens of ``toks[lo:hi]`` outside every ``(``/``[`` opened there (the
    brackets themselves left out), up to the first ``)``/``]`` closing none of them.

    >>> toks = tokenize("(a, f(b, c)[1], d) + e")
    >>> [toks[k].text for k in top_level(toks, 1)]
    ['a', ',', 'f', ',', 'd']
    """
    pairs = bracket_pairs(toks)
    k, hi = lo, len(toks) if hi is None else hi
    while k < hi:
        j = pairs[k]
        if j == NOT_BRACKET:
            yield k
            k += 1
        elif j > k:  # a "(" or "[": past its partner
            k = j + 1
        else:  # a closing bracket opened before lo, or an opening one never closed
            return



def check_balanced(toks: Sequence[Token], text: str, what: str = "statement") -> None:
    """Raise :class:`SQLError` unless every parenthesis and bracket in ``toks`` (the tokens
    of ``text``) pairs.

    >>> check_balanced(tokenize("f(a[1])"), "f(a[1])")
    """
    # A ``)`` closing nothing would hide the ``;`` after it from the splitter (its depth
    # is negative): every parenthesis and bracket must pair, each with its own kind. Up to
    # the first that does not, the pairs of bracket_pairs are a kind-checking stack's.
    pairs = bracket_pairs(toks)
    if -1 not in pairs and "[" not in text and "]" not in text:
        return  # all paired, and all parentheses (no bracket token without its character)
    for i, j in enumerate(pairs):
        if j == -1 and toks[i].text in ")]" or j >= 0 and j < i and (toks[j].text == "(") != (toks[i].text == ")"):
            raise SQLError(f"{what}: unbalanced {toks[i].text!r} at offset {toks[i].start} in {text[:200]!r}")
    unclosed = [i for i, j in enumerate(pairs) if j == -1]
    if unclosed:
        t = toks[unclosed[-1]]
        raise SQLError(f"{what}: unclosed {t.text!r} at offset {t.start} in {text[:200]!r}")


#: The deepest nesting colmz reads: parentheses, brackets and chained ``::`` casts counted
#: together (``CAST(CAST(x AS t) AS t)`` and ``x::t::t`` are both 2 deep). Materialize's
#: parser refuses a statement past 128 recursions (``RECURSION_LIMIT`` in
#: ``src/sql-parser/src/parser.rs``) and each parenthesised level takes two of them; colmz's
#: rewrites (:mod:`colmz.sql.translate`) read a nested construct once per level, so what is
#: deeper is refused before any of them runs.
MAX_NESTING = 64
#: Words that continue a type name after ``::`` (``double precision``, ``timestamp with time
#: zone``): they do not end a chain of casts.
_TYPE_TAIL_WORDS = frozenset({"PRECISION", "VARYING", "WITH", "WITHOUT", "TIME", "ZONE"})


def nesting_depth(toks: Sequence[Token]) -> int:
    """How deep ``toks`` nest: open parentheses and brackets (:func:`bracket_pairs`) plus the
    casts of a ``::`` chain at each level, at the deepest token. One pass over the tokens.

    >>> nesting_depth(tokenize("f((a)) + CAST(CAST(b AS numeric) AS text)")), nesting_depth(tokenize("x::a::b[]"))
    (2, 3)
    """
    pairs = bracket_pairs(toks)
    chains = [0]  # per open level: the casts chained at that level so far
    depth = deepest = 0
    prev = None
    for t, pair in zip(toks, pairs):
        if pair != NOT_BRACKET:
            if t.text in "([":
                chains.append(0)
                depth += 1
            elif pair >= 0:  # (a ")" or "]" closing nothing is passed over)
                depth -= 1 + chains.pop()
        elif t.kind == "op":
            if t.text == "::":
                chains[-1] += 1
                depth += 1
            elif t.text != ".":  # another operator ends the chain: its operand is whole
                depth -= chains[-1]
                chains[-1] = 0
        elif (t.kind == "word" and (prev is None or prev.text != "::")
              and t.upper not in _TYPE_TAIL_WORDS):
            depth -= chains[-1]  # a keyword (AS, AND, THEN, ...) ends it too
            chains[-1] = 0
        if depth > deepest:
            deepest = depth
        prev = t
    return deepest


def check_nesting(toks: Sequence[Token], text: str) -> None:
    """Refuse ``text`` (:class:`colmz.sql.UnsupportedSQL`) when its tokens nest deeper than
    :data:`MAX_NESTING` (:func:`nesting_depth`). ``toks`` are the tokens of ``text``.

    >>> q = "SELECT " + "(" * 65 + "1" + ")" * 65; check_nesting(tokenize(q), q)
    Traceback (most recent call last):
    ...
    colmz.sql.UnsupportedSQL: expressions nested 65 deep (parentheses, brackets and :: casts) are not supported by colmz: at most 64, in 'SELECT (((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((1)))))))'
    """
    if text in _SHALLOW:
        return
    # each level nesting_depth counts opens at a "(", "[" or "::" token, each of whose
    # characters the text holds: a text holding few of them nests no deeper (str.count runs
    # in C; the token pass is for the texts that might)
    if isinstance(text, str) and text.count("(") + text.count("[") + text.count("::") <= MAX_NESTING:
        return
    depth = nesting_depth(toks)
    if depth > MAX_NESTING:
        raise UnsupportedSQL(
            f"expressions nested {depth} deep (parentheses, brackets and :: casts) are not "
            f"supported by colmz: at most {MAX_NESTING}, in {text[:80]!r}")


def require_text(value, name: str) -> str:
    """``value`` when it is a ``str``, else ``TypeError`` naming ``name`` and the type given
    (SQL text enters colmz only as ``str``: bytes are not decoded on a guess).

    >>> require_text(b"SELECT 1", "sql")
    Traceback (most recent call last):
    ...
    TypeError: sql must be a str of SQL text, got bytes
    """
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str of SQL text, got {type(value).__name__}")
    return value


def token_name(t) -> str | None:
    """The identifier a token names (a word as written, a quoted one unquoted), else ``None``."""
    if t.kind == "word":
        return t.text
    if t.kind == "qident":
        return t.text[1:-1].replace('""', '"')
    return None


@functools.lru_cache(maxsize=256)
def cte_columns_of(text: str) -> dict[str, frozenset[tuple[str, ...]]]:
    """Every ``WITH`` list's CTEs in ``text``: name -> the column-name lists its definitions
    give (``()`` for none), as PostgreSQL's grammar writes them: ``WITH [RECURSIVE] name
    [(col, ...)] AS [[NOT] MATERIALIZED] (query), ...``. A definition not read to its
    body's closing parenthesis is not recorded (its CTE then has no entry: the planner
    refuses it rather than guess its names).

    >>> cte_columns_of("WITH c(a, b) AS (SELECT 1, 2), d AS (SELECT 3) SELECT * FROM c, d")
    {'c': frozenset({('a', 'b')}), 'd': frozenset({()})}
    """
    found: dict[str, set[tuple[str, ...]]] = {}
    for name, cols, *_ in cte_definitions(text):
        found.setdefault(name, set()).add(cols)
    return {k: frozenset(v) for k, v in found.items()}


def cte_definitions(text: str) -> Iterator[tuple[str, tuple[str, ...], int, int, int, bool]]:
    """Each CTE definition of ``text``'s ``WITH`` lists, in text order, as read by
    :func:`cte_columns_of`: ``(name, column names, body start, body end, list, recursive)``
    -- the body the characters between its parentheses, ``list`` the offset of its list's
    ``WITH``, ``recursive`` whether that is ``WITH RECURSIVE``.

    >>> text = "WITH c(a, b) AS (SELECT 1, 2) SELECT * FROM c"
    >>> [(n, cols, text[s:e], at, r) for n, cols, s, e, at, r in cte_definitions(text)]
    [('c', ('a', 'b'), 'SELECT 1, 2', 0, False)]
    """
    toks = tokenize(text)
    n = len(toks)

    def op(j: int, s: str) -> bool:
        return j < n and toks[j].kind == "op" and toks[j].text == s

    def word(j: int, s: str) -> bool:
        return j < n and toks[j].kind == "word" and toks[j].upper == s

    for i, t in enumerate(toks):
        if not (t.kind == "word" and t.upper == "WITH"):
            continue
        recursive = word(i + 1, "RECURSIVE")
        j = i + 2 if recursive else i + 1
        while j < n:
            name = token_name(toks[j])
            if name is None:
                break
            j += 1
            cols: tuple[str, ...] = ()
            if op(j, "("):
                close = closing(toks, j)
                if close < 0:
                    break
                inner = toks[j + 1:close]
                names = [token_name(x) for x in inner[::2]]
                if not names or None in names or not all(x.kind == "op" and x.text == "," for x in inner[1::2]) \
                        or len(inner) % 2 == 0:
                    break
                cols = tuple(names)
                j = close + 1
            if not word(j, "AS"):
                break
            j += 1
            if word(j, "NOT"):
                j += 1
            if word(j, "MATERIALIZED"):
                j += 1
            if not op(j, "("):
                break
            close = closing(toks, j)
            if close < 0:
                break
            yield name, cols, toks[j].end, toks[close].start, t.start, recursive
            j = close + 1
            if not op(j, ","):
                break
            j += 1
