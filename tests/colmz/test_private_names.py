"""No colmz module uses an underscored name of another module: the package's rule that an
internal API used across modules has a public name in its module.

An underscored name is its module's own: another module that needs it gets a public name
with a docstring. Checked on the source (``ast``):

* no ``from m import _x``, and no ``X._y`` (at any depth of ``X._y._z`` or ``X.a._y``) where
  ``X`` is a name the module imported;
* no ``v._y`` where ``v``'s class is known statically and ``_y`` belongs to another module:
  ``v`` is a parameter annotated with a class, a local assigned ``C(...)`` (or ``cls(...)`` in
  a classmethod of ``C``), or ``self.a`` assigned such a parameter. A class imported from
  another module owns every underscored attribute of its objects; for a class defined in
  the module, the owner of ``_y`` is the first class of its MRO that defines it (in its
  body, or as ``self._y = ...`` in a method), which may be a base from another module.

``self._y`` and ``cls._y`` themselves are the class's own business (the parts of one class
split across modules -- ``colmz.arrangement``'s mixins -- share their attributes by ``self``);
an object whose class is not decidable from the source (an unannotated parameter, a call's
result) is not seen here.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from functools import cache
from pathlib import Path

import colmz

ROOT = Path(colmz.__file__).parent

#: ``(module, imported name)`` whose private attributes are a third party's, not colmz's:
#: ``assign_ranks`` is a Numba dispatcher, whose on-disk cache index has no public name.
THIRD_PARTY = {("colmz/runtime.py", "assign_ranks")}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


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
                if _private(a.name):
                    found.append(f"{rel}:{node.lineno} imports {a.name}")
                imported.add(a.asname or a.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in imported and (rel, base.id) not in THIRD_PARTY:
                found.append(f"{rel}:{node.lineno} uses {base.id}...{node.attr}")
    return found


# -- objects of a known class ----------------------------------------------------------------


def _annotated_class(ann: ast.expr | None) -> str | None:
    """The class name an annotation names (``C``, ``"C"``, ``C | None``, ``Optional[C]``)."""
    if ann is None:
        return None
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(ann, ast.Name):
        return ann.id
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        sides = [_annotated_class(s) for s in (ann.left, ann.right)
                 if not (isinstance(s, ast.Constant) and s.value is None)]
        return sides[0] if len(sides) == 1 else None
    if isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and ann.value.id == "Optional":
        return _annotated_class(ann.slice)
    return None


def _receiver(expr: ast.expr) -> str | None:
    """``v`` or ``self.a`` as a key of the known classes, else None."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        return f"self.{expr.attr}"
    return None


def _function_classes(fn, enclosing: str | None, fields: dict[str, str]) -> dict[str, str]:
    """``{receiver: class name}`` known inside ``fn``: its annotated parameters, its locals
    assigned a constructor call and the instance fields of its class."""
    known = dict(fields)
    args = fn.args
    for a in (*args.posonlyargs, *args.args, *args.kwonlyargs):
        c = _annotated_class(a.annotation)
        if c is not None and a.arg not in ("self", "cls"):
            known[a.arg] = c
    is_classmethod = any(isinstance(d, ast.Name) and d.id == "classmethod" for d in fn.decorator_list)
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
                if value.func.id == "cls" and is_classmethod and enclosing is not None:
                    known[node.targets[0].id] = enclosing
                elif value.func.id[:1].isupper():
                    known[node.targets[0].id] = value.func.id
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            c = _annotated_class(node.annotation)
            if c is not None:
                known[node.target.id] = c
    return known


def _instance_fields(cls: ast.ClassDef) -> dict[str, str]:
    """``{"self.a": class name}`` for the fields a method assigns an annotated parameter, or
    annotates (``self.a: C = ...``)."""
    fields = {}
    for fn in cls.body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = _function_classes(fn, None, {})
        for node in ast.walk(fn):
            target = value = None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            elif isinstance(node, ast.AnnAssign):
                target, value = node.target, None
                c = _annotated_class(node.annotation)
                key = _receiver(target)
                if c is not None and key and key.startswith("self."):
                    fields[key] = c
                continue
            key = _receiver(target) if target is not None else None
            if key and key.startswith("self.") and isinstance(value, ast.Name) and value.id in params:
                fields[key] = params[value.id]
    return fields


def _typed_attribute_uses(tree: ast.Module):
    """``(line, receiver, class name, attribute)`` of every ``v._y`` whose ``v`` has a known
    class (``self``/``cls`` left out)."""
    out = []

    def visit(node, enclosing: str | None, fields: dict[str, str]):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, child.name, _instance_fields(child))
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                known = _function_classes(child, enclosing, fields)
                for sub in ast.walk(child):
                    if isinstance(sub, ast.Attribute) and _private(sub.attr):
                        key = _receiver(sub.value)
                        if key in known:
                            out.append((sub.lineno, key, known[key], sub.attr))
            else:
                visit(child, enclosing, fields)

    visit(tree, None, {})
    return sorted(out)


@cache
def _class_defines(module: str, qualname: str, attr: str) -> bool:
    # whether the class's own source defines ``attr``: in its body or as ``self.attr = ...``
    source = Path(importlib.import_module(module).__file__).read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == qualname.rsplit(".", 1)[-1]:
            for sub in ast.walk(node):
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and sub.name == attr:
                    return True
                if isinstance(sub, ast.Name) and sub.id == attr and isinstance(sub.ctx, ast.Store):
                    return True
                if (isinstance(sub, ast.Attribute) and sub.attr == attr and isinstance(sub.ctx, ast.Store)
                        and isinstance(sub.value, ast.Name) and sub.value.id == "self"):
                    return True
                if isinstance(sub, ast.Constant) and sub.value == attr:  # __slots__
                    return True
    return False


def _owner(cls: type, attr: str) -> str | None:
    """The module of the first class of ``cls``'s MRO that defines ``attr``, or None."""
    for k in inspect.getmro(cls):
        if k is object:
            continue
        if attr in vars(k) or _class_defines(k.__module__, k.__qualname__, attr):
            return k.__module__
    return None


def _foreign_attribute_uses(path: Path, source: str, module: str | None) -> list[str]:
    """``v._y`` where ``v``'s class, or the class of its MRO owning ``_y``, is another
    module's."""
    tree = ast.parse(source)
    rel = path.relative_to(ROOT.parent).as_posix()
    local = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    imported = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                imported[a.asname or a.name] = node.module or "."
    found = []
    for line, receiver, name, attr in _typed_attribute_uses(tree):
        if name in local:
            if module is None:
                continue  # a source without a module (the check's own test): its classes are its own
            owner = _owner(getattr(importlib.import_module(module), name), attr)
            if owner is not None and owner != module:
                found.append(f"{rel}:{line} uses {receiver}.{attr} ({name}'s, from {owner})")
        elif name in imported:
            found.append(f"{rel}:{line} uses {receiver}.{attr} ({name} is {imported[name]}'s)")
    return found


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_module_uses_another_modules_underscored_names():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        found += _private_uses(path, path.read_text())
    assert found == []


def test_no_module_uses_underscored_attributes_of_another_modules_objects():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        found += _foreign_attribute_uses(path, path.read_text(), _module_name(path))
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


def test_the_check_sees_underscored_attributes_of_objects_of_imported_classes():
    # a parameter annotated with another module's class, a field holding one, a local
    # constructed from one; this module's own classes, self and undecidable objects pass
    path = ROOT / "example.py"
    source = (
        "from __future__ import annotations\n"
        "from colmz.arrangement.core import ArrangementCore\n"
        "class Job:\n"
        "    def __init__(self, arrangement: ArrangementCore, other):\n"
        "        self.arrangement = arrangement\n"
        "        self.other = other\n"
        "        arrangement._writer(1)\n"
        "    def result(self):\n"
        "        self.arrangement._count_write(2)\n"
        "        self.other._count_write(2)\n"
        "        self._mine()\n"
        "class Mine:\n"
        "    def _own(self): ...\n"
        "def f(a: 'ArrangementCore | None', m: Mine, x):\n"
        "    a._read_schema()\n"
        "    m._own()\n"
        "    x._whatever()\n"
        "    b = ArrangementCore()\n"
        "    b._counters\n"
    )
    assert _foreign_attribute_uses(path, source, None) == [
        "colmz/example.py:7 uses arrangement._writer (ArrangementCore is colmz.arrangement.core's)",
        "colmz/example.py:9 uses self.arrangement._count_write (ArrangementCore is colmz.arrangement.core's)",
        "colmz/example.py:15 uses a._read_schema (ArrangementCore is colmz.arrangement.core's)",
        "colmz/example.py:19 uses b._counters (ArrangementCore is colmz.arrangement.core's)",
    ]


def test_the_check_finds_the_owner_of_an_inherited_attribute():
    # Arrangement is handle.py's, but its _schema is ArrangementCore's (core.py)
    from colmz.arrangement import Arrangement

    assert _owner(Arrangement, "_schema") == "colmz.arrangement.core"
    assert _owner(Arrangement, "_machine") == "colmz.arrangement.handle"
    assert _owner(Arrangement, "_nothing") is None
