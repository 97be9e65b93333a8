"""No colmz module uses an underscored name of another module: the package's rule that an
internal API used across modules has a public name in its module.

An underscored name is its module's own: another module that needs it gets a public name
with a docstring. Checked on the source (``ast``): no ``from m import _x``, and no ``X._y``
(at any depth of ``X._y._z`` or ``X.a._y``) where ``X`` is a name the module imported.
Attributes of an object a module holds (``self._x``, a parameter's ``_x``) are not seen here;
the per-module tests of those (e.g. ``tests/colmz/test_updates.py``'s field reads) cover them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import colmz

ROOT = Path(colmz.__file__).parent

#: ``(module, imported name)`` whose private attributes are a third party's, not colmz's:
#: ``assign_ranks`` is a Numba dispatcher, whose on-disk cache index has no public name.
THIRD_PARTY = {("colmz/runtime.py", "assign_ranks")}


def _private_uses(path: Path, source: str) -> list[str]:
    tree = ast.parse(source)
    imported = set()
    found = []
    rel = path.relative_to(ROOT.parent).as_posix()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    found.append(f"{rel}:{node.lineno} imports {a.name}")
                imported.add(a.asname or a.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in imported and (rel, base.id) not in THIRD_PARTY:
                found.append(f"{rel}:{node.lineno} uses {base.id}...{node.attr}")
    return found


def test_no_module_uses_another_modules_underscored_names():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        found += _private_uses(path, path.read_text())
    assert found == []


def test_the_check_sees_imports_and_attributes_of_imported_names():
    path = ROOT / "example.py"
    source = (
        "from colmz.updates import Updates, _x\n"
        "import colmz.ops as ops\n"
        "def f(self):\n"
        "    Updates._from_parts(1)\n"
        "    ops.helper._cache\n"
        "    self._mine\n"
    )
    assert sorted(_private_uses(path, source)) == [
        "colmz/example.py:1 imports _x",
        "colmz/example.py:4 uses Updates..._from_parts",
        "colmz/example.py:5 uses ops..._cache",
    ]
