"""Where a durable ``colmz.Catalog`` may live: ``create=False`` opens an existing one only,
a read-only store is read without writing, and a new catalog is never put inside another
store."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pytest

import colmz
from colmz.catalog.location import NestedStore
from colmz.catalog.store import CatalogStore
from colmz.storage.url import Location, open_location


def q(cat, sql):
    return sorted(tuple(r.values()) for r in cat.sql(sql).to_pylist())


def _catalog(path):
    cat = colmz.Catalog(path)
    cat.execute("CREATE TABLE t (k INT); CREATE MATERIALIZED VIEW v AS SELECT count(*) AS n FROM t;"
                "CREATE CONTINUAL TASK log ON INPUT t AS (INSERT INTO log SELECT * FROM t)")
    cat.execute("INSERT INTO t VALUES (1), (2)")
    cat.execute("INSERT INTO t VALUES (3)")
    return cat


def _listing(path):
    return sorted((os.path.relpath(os.path.join(d, f), path), os.path.getsize(os.path.join(d, f)))
                  for d, _, fs in os.walk(path) for f in fs)


# ----------------------------------------------------------------------------- create=False


def test_create_false_opens_an_existing_catalog_and_creates_nothing(tmp_path):
    _catalog(tmp_path / "c")
    cat = colmz.Catalog(tmp_path / "c", create=False)
    assert q(cat, "SELECT * FROM t") == [(1,), (2,), (3,)] and q(cat, "SELECT * FROM v") == [(3,)]
    for where in (tmp_path / "typo_dir", tmp_path / "empty"):
        if where.name == "empty":
            where.mkdir()
        with pytest.raises(FileNotFoundError, match="typo_dir|no catalog at"):
            colmz.Catalog(where, create=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "empty"]
    assert list((tmp_path / "empty").iterdir()) == []
    with pytest.raises(TypeError, match="create must be a bool"):
        colmz.Catalog(tmp_path / "c", create="no")


# ----------------------------------------------------------------------------- read-only


class _ReadOnly:
    """A blob or consensus that refuses every write (as a read-only directory does, which
    root bypasses): reads pass through."""

    WRITES = ("set", "delete", "compare_and_set", "truncate", "put_if_absent")

    def __init__(self, inner):
        self._inner = inner
        self.read_only = True

    def __getattr__(self, name):
        if name in self.WRITES:
            def refuse(*args, **kwargs):
                raise PermissionError(f"read-only: {name}{args[:1]}")
            return refuse
        return getattr(self._inner, name)

    def __repr__(self):
        return f"ReadOnly({self._inner!r})"


def _read_only(path):
    loc = open_location(str(path), create=False)
    return Location(_ReadOnly(loc.blob), _ReadOnly(loc.consensus), loc.url)


def test_a_read_only_store_is_read_and_a_write_refused_unchanged(tmp_path):
    _catalog(tmp_path)
    before = _listing(tmp_path)
    cat = colmz.Catalog(_read_only(tmp_path), create=False)
    assert q(cat, "SELECT * FROM t") == [(1,), (2,), (3,)]
    assert q(cat, "SELECT * FROM log") == [(1,), (2,), (3,)] and q(cat, "SELECT * FROM v") == [(3,)]
    now = cat.now
    with pytest.raises(PermissionError, match="read-only.*nothing was changed"):
        cat.execute("INSERT INTO t VALUES (4)")
    assert cat.now == now and q(cat, "SELECT * FROM t") == [(1,), (2,), (3,)]
    cat.refresh()
    assert q(cat, "SELECT * FROM v") == [(3,)]
    assert _listing(tmp_path) == before


def test_a_read_only_store_with_a_pending_intent_is_refused_clearly(tmp_path, monkeypatch):
    cat = _catalog(tmp_path)
    with monkeypatch.context() as m:  # a writer that died between the record's commit and the apply
        m.setattr(CatalogStore, "apply", lambda self, state: None)
        cat.execute("INSERT INTO t VALUES (9)")
    with pytest.raises(PermissionError, match=r"not applied yet \(objects \['t'.*open the catalog once"):
        colmz.Catalog(_read_only(tmp_path), create=False)
    assert q(colmz.Catalog(tmp_path), "SELECT * FROM t") == [(1,), (2,), (3,), (9,)]


_AS_NOBODY = textwrap.dedent("""
    import sys
    import colmz
    path = sys.argv[1]
    try:
        colmz.Catalog(path)
    except PermissionError as e:
        print("create=True:", e)
    cat = colmz.Catalog(path, create=False)
    print(sorted(r["k"] for r in cat.sql("SELECT * FROM t").to_pylist()), cat.sql("SELECT n FROM v").to_pylist())
    try:
        cat.execute("INSERT INTO t VALUES (4)")
    except PermissionError as e:
        print("write:", e)
""")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to read as an unprivileged user")
def test_a_read_only_directory_is_read_by_a_user_who_cannot_write_it():
    # A directory root made and others may only read: the tests run as root, which no mode
    # stops, so the reader is another user.
    root = tempfile.mkdtemp(prefix="colmz-ro-", dir="/tmp")
    try:
        os.chmod(root, 0o755)
        _catalog(os.path.join(root, "c"))
        for d, dirs, files in os.walk(root):
            for n in dirs:
                os.chmod(os.path.join(d, n), 0o755)
            for n in files:
                os.chmod(os.path.join(d, n), 0o644)
        before = _listing(root)
        script = os.path.join(root, "read.py")
        with open(script, "w") as f:
            f.write(_AS_NOBODY)
        os.chmod(script, 0o644)
        # NUMBA_DISABLE_JIT: the shared kernel cache is root's to write; the kernels run as Python
        env = {**os.environ, "NUMBA_DISABLE_JIT": "1", "HOME": root}
        out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
                              "-W", "ignore", script, os.path.join(root, "c")], capture_output=True, text=True,
                             env=env, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        lines = out.stdout.splitlines()
        assert lines[0].startswith("create=True:") and "create=False" in lines[0]
        assert lines[1] == "[1, 2, 3] [{'n': 3}]"
        assert lines[2].startswith("write:") and "read-only" in lines[2]
        os.unlink(script)
        assert _listing(root) == [x for x in before if x[0] != "read.py"]
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ----------------------------------------------------------------------------- nested stores


def test_a_catalog_inside_another_store_is_refused_naming_it(tmp_path):
    _catalog(tmp_path / "s")
    a = colmz.Arrangement.open(str(tmp_path / "a"))
    a.seal(1)
    before = _listing(tmp_path)
    for inside, store in [(tmp_path / "s" / "blob", "s"), (tmp_path / "s" / "sub", "s"),
                          (tmp_path / "s" / "blob" / "x" / "y", "s"), (tmp_path / "a" / "blob", "a"),
                          (f"file://{tmp_path / 'a' / 'blob'}", "a")]:
        with pytest.raises(NestedStore, match=rf"inside the store at '{tmp_path / store}'"):
            colmz.Catalog(inside)
    assert _listing(tmp_path) == before  # nothing created
    # beside a store, and the store itself, are fine
    assert colmz.Catalog(tmp_path / "beside").names == []
    assert "t" in colmz.Catalog(tmp_path / "s")
