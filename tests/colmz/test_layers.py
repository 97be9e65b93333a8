"""The layers of colmz, checked on the import graph (``colmz/collection.py``'s docstring).

Collections (:mod:`colmz.collection`), the durable arrangement (:mod:`colmz.arrangement`),
storage, the catalog's store, dataflow operators and the update kernels stand below the
SQL layer: none of them imports :mod:`colmz.continual` or :mod:`colmz.sql`, directly or
through another module, at import time or inside a function. The graph is read from the
source (``ast``), since importing any ``colmz.x`` runs the package ``colmz/__init__.py``,
which imports every layer; imports under ``if TYPE_CHECKING:`` are annotations only and
are not edges. An import of ``colmz.a.b`` runs ``colmz/a/__init__.py`` too, so it is an
edge to the package as well.
"""

from __future__ import annotations

import ast
from pathlib import Path

import colmz
import colmz.collection as collection
import colmz.column_types as column_types
import colmz.continual as continual
import colmz.continual.model as model
import colmz.errors as errors
import colmz.sql as sql

ROOT = Path(colmz.__file__).parent

#: The layers above the collections: what nothing below may import.
UPPER = ("colmz.continual", "colmz.sql", "colmz.catalog")
#: The catalog's store and where it may be created stand below the SQL layer, inside the
#: catalog package (whose engine stands above it).
LOWER_IN_UPPER = ("colmz.catalog.store", "colmz.catalog.location")
#: Package facades that only re-export: importing one of their modules runs them, as it runs
#: ``colmz/__init__.py``, and is no edge to them (an explicit import of the package is).
FACADES = ("colmz.catalog",)
#: Modules that stand above the collections themselves (the package facade, the notebook
#: renderers, the as-of selection over catalogs and tasks, the plan of a view's query and
#: its lowerings' modules -- built from SQL's parse tree, beside the operators it renders,
#: which stay below -- its
#: rendering, the operators that run SQL: ``GroupRecompute``, DuckDB recomputing the affected
#: groups, and the Map/Filter segment, both through colmz.sql.translate; the jsonb check, through
#: colmz.sql.jsonb's reading of a document; the ranking windows
#: GroupRecompute keeps natively, recognized on colmz.sql.tree's nodes of its SQL -- the catalog's
#: maintained view, which plans a view's SQL, and SUBSCRIBE over a catalog's objects and
#: queries) and so are not checked.
ABOVE = ("colmz", "colmz.display", "colmz.as_of", "colmz.plot", "colmz.dataflow.plan", "colmz.dataflow.plan_binding",
         "colmz.dataflow.plan_joins", "colmz.dataflow.plan_pushdown", "colmz.dataflow.plan_reduce", "colmz.dataflow.plan_setops",
         "colmz.dataflow.plan_subqueries", "colmz.dataflow.plan_windows", "colmz.dataflow.render",
         "colmz.dataflow.recompute", "colmz.dataflow.ranking", "colmz.dataflow.maintained", "colmz.dataflow.sqlmap",
         "colmz.dataflow.jsonbcheck",
         "colmz.subscribe")


def _module_files() -> dict[str, Path]:
    out = {}
    for f in ROOT.rglob("*.py"):
        parts = ["colmz", *f.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING"))


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    named: set[str] = set()
    stack: list[ast.AST] = [ast.parse(path.read_text())]
    while stack:
        node = stack.pop()
        if _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            named.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            named.add(module)
            named.update(f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in modules)
        stack.extend(ast.iter_child_nodes(node))
    edges = set()
    for m in named:
        parts = m.split(".")
        if parts[0] != "colmz":
            continue
        # colmz.a.b runs colmz/a/__init__.py first; the facade colmz/__init__.py is not an
        # edge (every module runs it).
        edges.update(".".join(parts[:i]) for i in range(2, len(parts) + 1) if ".".join(parts[:i]) in modules
                     and (i == len(parts) or ".".join(parts[:i]) not in FACADES))
    return edges


def _graph() -> dict[str, set[str]]:
    modules = _module_files()
    return {m: _imports(m, f, modules) for m, f in modules.items()}


def _path_to_upper(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """The first chain of imports from ``start`` to a module of :data:`UPPER`, if any."""
    parent: dict[str, str | None] = {start: None}
    queue = [start]
    while queue:
        m = queue.pop(0)
        for n in sorted(graph[m]):
            if n in parent:
                continue
            parent[n] = m
            if not _below(n) and n not in ABOVE:
                chain = [n]
                while parent[chain[-1]] is not None:
                    chain.append(parent[chain[-1]])
                return chain[::-1]
            queue.append(n)
    return None


def _below(name: str) -> bool:
    if name in LOWER_IN_UPPER:
        return True
    return not (name in ABOVE or name in UPPER or name.startswith(tuple(u + "." for u in UPPER)))


def test_no_module_below_the_sql_layer_imports_continual_or_sql():
    graph = _graph()
    below = sorted(m for m in graph if _below(m))
    # The modules the layering is about are all checked (a rename must not drop one).
    for m in ("colmz.collection", "colmz.rows", "colmz.column_types", "colmz.errors",
              "colmz.catalog.store", "colmz.catalog.location", "colmz.arrangement", "colmz.arrangement.collection",
              "colmz.arrangement.parts", "colmz.arrangement.part_ref",
              "colmz.arrangement.part_writer", "colmz.arrangement.merge",
              "colmz.arrangement.gather", "colmz.arrangement.read_words", "colmz.storage", "colmz.dataflow",
              "colmz.dataflow.sink"):
        assert m in below, m
    chains = {m: c for m in below if (c := _path_to_upper(graph, m)) is not None}
    assert chains == {}, "\n".join(" -> ".join(c) for c in chains.values())


def test_the_graph_sees_lazy_imports_and_skips_type_checking(tmp_path):
    # The check would pass vacuously if it missed imports inside functions.
    modules = {"colmz.a": tmp_path / "a.py", "colmz.sql": tmp_path / "sql.py",
               "colmz.catalog": tmp_path / "catalog.py"}
    modules["colmz.a"].write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from colmz.catalog import Catalog\n"
        "def f():\n    from colmz.sql import arrow_type\n")
    assert _imports("colmz.a", modules["colmz.a"], modules) == {"colmz.sql"}


def test_collection_names_stay_where_users_import_them():
    for name in ("MemoryCollection", "RowCounts", "UpperMismatch"):
        assert getattr(continual, name) is getattr(collection, name)
        assert getattr(model, name) is getattr(collection, name)
    assert colmz.MemoryCollection is collection.MemoryCollection
    assert colmz.UpperMismatch is collection.UpperMismatch
    assert sql.UnsupportedSQL is errors.UnsupportedSQL
    assert sql.UnsupportedSQL.__module__ == "colmz.sql"
    assert sql.arrow_type is column_types.arrow_type
