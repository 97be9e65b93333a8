"""PostgreSQL's ``||`` of arrays where it hangs on a column's type: applied to a translated
query once the relations it reads (and so which of their columns are arrays) are known.

:func:`colmz.sql.translate.translate` cannot tell an array column from any other, so it
writes ``a || b`` as the concatenation of their texts (each operand through
:data:`colmz.sql.translate.ANY_TEXT`, which refuses an array's text by name). The catalog
knows the relations' column types when it runs a query; :func:`array_edits`, over the
references resolved (:mod:`colmz.sql.column_rules`), makes a ``||`` with an array operand -- a
column resolved to an array column, ``ARRAY[...]``, a cast to an array type, such a ``||``
itself -- PostgreSQL 15's array operator (``src/backend/utils/adt/array_userfuncs.c``):

* **array || array** is ``array_cat``: a NULL operand is left out, NULL only when both are
  (DuckDB's ``||`` of lists is NULL beside a NULL; its ``list_concat`` of two NULLs is
  ``[]``: :data:`ARRAY_CAT`). A ``NULL`` literal beside an array is an array there
  (PostgreSQL resolves the unknown to the array's type).
* **array || element** is ``array_append``, **element || array** ``array_prepend``: a NULL
  array is an empty one (``NULL::int[] || 1`` is ``{1}``).
* a string literal beside an array is PostgreSQL's array text of the array's type; colmz
  cannot read it there (its type is the other operand's): refused by name.

Invariants: only an operand certainly an array makes a ``||`` an array operator (a
reference the resolver could not resolve is left as translate wrote it, refused when its
text is asked for); the rewrite is a pure function of the text and the relations' array
columns, cached; a text the tree cannot read is returned unchanged.
"""

from __future__ import annotations

from colmz.sql.errors import UnsupportedSQL
from colmz.sql.pgfuncs import ARRAY_CAT
from colmz.sql.translate import ANY_TEXT
from colmz.sql.tree import Expression
from colmz.sql.typing_pass import ResolvedRules, TypedText, outermost_edits

__all__ = ["array_edits"]

_STRING_BESIDE_ARRAY = ("|| of an array and a string literal is not supported by colmz (PostgreSQL reads the "
                        "string as an array of the other operand's type): write ARRAY[...] or a cast")


def array_edits(t: TypedText) -> list[tuple[int, int, str]]:
    """The edits of this module's rules over ``t``: each outermost node they rewrite."""
    return outermost_edits(t.queries, _Rules(t.text, t.arrays))


class _Rules(ResolvedRules):
    # || of array columns, over the nodes of one text
    def array(self, e: Expression) -> bool:
        # whether ``e`` (an operand, translate's text wrapper taken off) is certainly an array
        e = _unwrapped(e)
        if e.cls == "COLUMN_REF":
            return self.resolved.get((e.start, e.end)) == "array"
        if e.cls == "OPERATOR" and e.type == "ARRAY_CONSTRUCTOR":
            return True
        if e.cls == "CAST" and len(e.children) == 2 and e.children[1].start >= 0:
            return self.text[e.children[1].start : e.children[1].end].rstrip().endswith("]")
        return self.concat(e) and any(self.array(k) for k in e.children)

    @staticmethod
    def concat(e: Expression) -> bool:
        return e.cls == "FUNCTION" and e.name == ("||",) and len(e.children) == 2

    def render(self, e: Expression, override: dict[int, str] | None = None) -> str:
        # translate's text wrapper taken off, the rule applied below a || alone
        return super().render(_unwrapped(e), override)

    def spliced(self, e: Expression, override: dict[int, str] | None = None) -> str:
        return super().spliced(e, override) if self.concat(e) else self.text[e.start : e.end]

    def rule(self, e: Expression) -> str | None:
        if not self.concat(e):
            return None
        left, right = e.children
        la, ra = self.array(left), self.array(right)
        if not (la or ra):
            return None
        other = _unwrapped(right if la else left)
        if not (la and ra) and other.literal is not None and other.literal.kind == "STRING":
            raise UnsupportedSQL(_STRING_BESIDE_ARRAY)
        lt, rt = self.render(left), self.render(right)
        if (la and ra) or (other.literal is not None and other.literal.kind == "NULL_LITERAL"):
            return f"{ARRAY_CAT}({lt}, {rt})"
        return f"list_append({lt}, {rt})" if la else f"list_prepend({lt}, {rt})"


def _unwrapped(e: Expression) -> Expression:
    # translate's text of an operand of || (ANY_TEXT(x)) taken off
    while e.cls == "FUNCTION" and e.name == (ANY_TEXT,) and len(e.children) == 1:
        e = e.children[0]
    return e
