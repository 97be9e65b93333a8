"""Real storage servers for tests: PostgreSQL (``initdb``/``pg_ctl``) and S3 (moto), on loopback.

Each server starts once per test process, the first time a test asks for it, and stops when
the process exits. ``tests/conftest.py`` imports the fixtures, so every test can ask for
them; helpers are imported directly (``tests/`` is on ``sys.path``)::

    def test_x(location_factory):
        loc = location_factory("s3+postgres")   # a fresh, empty store: loc.blob, loc.consensus

Fixtures (all session-scoped)
-----------------------------
``pg_url``
    ``postgresql://postgres@127.0.0.1:PORT/colmz_test``. Skips when ``initdb`` is found
    neither on PATH nor in Debian's ``/usr/lib/postgresql/N/bin``.
``s3_endpoint``
    ``http://127.0.0.1:PORT`` of a moto S3 server; sets dummy AWS credentials in the
    environment. Skips when moto is not installed.
``location_factory``
    ``make(kind) -> colmz.storage.url.Location``: a fresh, empty store of ``kind`` on every
    call (so a Hypothesis example or state machine can take one per run). Kinds are
    :data:`BACKENDS`: ``"mem"``, ``"local"`` (LocalBlob + SqliteConsensus in a temp dir),
    ``"s3+postgres"``, and the mixed ``"local+postgres"`` and ``"s3+sqlite"``. PostgreSQL
    stores are isolated by a fresh schema each (``search_path`` in the URL), S3 stores by a
    fresh key prefix. A kind that needs a missing server skips the calling test.

Without fixtures (a Hypothesis state machine, a script): :func:`make_location(kind, tmp_dir)
<make_location>`, :func:`postgres_url`, :func:`moto_endpoint`, :func:`fresh_schema_url`,
:func:`s3_url`.

Under pytest-xdist the controller starts both servers before its workers and hands them
their addresses (:func:`share_servers`), so a distributed run too starts each server once.

Design notes: the PostgreSQL server refuses to run as root, so as root its data directory is
owned by the ``postgres`` user and the tools run through ``runuser -u postgres``. It runs with
``fsync=off`` (a test server: durability across power loss is not what is tested here, and
the machine is shared). Ports are picked free on 127.0.0.1; nothing listens elsewhere.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time
import uuid

import pytest

from colmz.storage.url import Location, open_location

#: Every kind ``location_factory`` makes; the first three are the supported pairings.
BACKENDS = ("mem", "local", "s3+postgres", "local+postgres", "s3+sqlite")


def pg_bin(tool: str) -> str | None:
    """``tool`` (initdb, pg_ctl) from PATH, else from Debian's /usr/lib/postgresql/N/bin."""
    found = shutil.which(tool)
    if found:
        return found
    for d in sorted(pathlib.Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (d / tool).exists():
            return str(d / tool)
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """A throwaway PostgreSQL cluster in a temp dir, listening on 127.0.0.1 only.

    ``settings`` are further server settings (``-c name=value``), given after the defaults
    below and so overriding them (a benchmark preloading an extension, or giving the server
    more memory than a test needs).
    """

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        self.initdb = pg_bin("initdb")
        self.pg_ctl = pg_bin("pg_ctl")
        if not self.initdb or not self.pg_ctl:
            raise FileNotFoundError("initdb/pg_ctl not on PATH")
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="colmz-pg-"))
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.sock.mkdir()
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
            shutil.chown(self.sock, "postgres", "postgres")
        self.port = free_port()
        self.user = "postgres"
        self.settings = dict(settings or {})

    def _run(self, *args: str) -> None:
        cmd = ["runuser", "-u", "postgres", "--", *args] if self.as_root else list(args)
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if out.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr or out.stdout}")

    def start(self) -> None:
        self._run(self.initdb, "-D", str(self.data), "-U", self.user, "-A", "trust", "--no-sync",
                  "-E", "UTF8", "--locale=C")
        opts = (f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c fsync=off "
                f"-c full_page_writes=off -c max_connections=200 -c shared_buffers=16MB")
        opts += "".join(f" -c {k}={v}" for k, v in self.settings.items())
        self._run(self.pg_ctl, "-D", str(self.data), "-o", opts, "-l", str(self.root / "log"),
                  "-w", "-t", "60", "start")
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE colmz_test")

    def url(self, db: str = "colmz_test") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{db}"

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._run(self.pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


# One server of each kind per process, however many conftests import the fixtures: started
# on first use, stopped at exit.
_SERVERS: dict[str, str] = {}
_FAILED: dict[str, str] = {}

#: Environment variables through which a process that started the servers hands them to the
#: processes it starts (the pytest-xdist controller to its workers: :func:`share_servers`).
SHARED = {"pg": "COLMZ_TEST_PG_URL", "s3": "COLMZ_TEST_S3_ENDPOINT"}
_SERVERS.update({kind: os.environ[var] for kind, var in SHARED.items() if os.environ.get(var)})


def share_servers() -> None:
    """Start the servers now and name them in the environment (:data:`SHARED`).

    Called by the pytest-xdist controller (``tests/conftest.py``) before it starts its
    workers, which inherit the environment and use these servers instead of starting their
    own: each server runs once per run, in the controller, and stops when it exits. A server
    that cannot start is not named, and each worker then skips or fails as a lone run does.
    """
    for kind, start in (("pg", postgres_url), ("s3", moto_endpoint)):
        try:
            os.environ[SHARED[kind]] = start()
        except (Exception, pytest.skip.Exception, pytest.fail.Exception):
            continue


def postgres_url() -> str:
    """URL of this process's PostgreSQL test database, starting the server on first use.

    Skips the calling test (``pytest.skip``) when initdb/pg_ctl or psycopg are missing.
    """
    if "pg" in _SERVERS:
        return _SERVERS["pg"]
    if not pg_bin("initdb") or not pg_bin("pg_ctl"):
        pytest.skip("PostgreSQL tests need initdb and pg_ctl on PATH (apt-get install postgresql)")
    pytest.importorskip("psycopg", reason="PostgreSQL tests need psycopg (pip install 'colmz[postgres]')")
    if "pg" in _FAILED:
        pytest.fail(f"the PostgreSQL test server failed to start: {_FAILED['pg']}")
    server = PostgresServer()
    try:
        server.start()
    except BaseException as e:
        server.stop()
        _FAILED["pg"] = str(e)
        raise
    atexit.register(server.stop)
    _SERVERS["pg"] = server.url()
    return _SERVERS["pg"]


@pytest.fixture(scope="session")
def pg_url() -> str:
    """URL of a session-wide PostgreSQL database (skips without initdb)."""
    return postgres_url()


def fresh_schema_url(pg_url: str) -> str:
    """A URL of ``pg_url``'s database whose ``search_path`` is a new, empty schema."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{pg_url}?options=-csearch_path%3D{schema}"


def moto_endpoint() -> str:
    """``http://127.0.0.1:PORT`` of this process's moto S3 server, started on first use
    (with dummy AWS credentials put in the environment). Skips when moto is missing."""
    if "s3" in _SERVERS:
        return _SERVERS["s3"]
    server_mod = pytest.importorskip("moto.server", reason="S3 tests need moto[server] (the dev extra)")
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    atexit.register(server.stop)
    host, port = server.get_host_and_port()
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    _SERVERS["s3"] = f"http://{host}:{port}"
    return _SERVERS["s3"]


@pytest.fixture(scope="session")
def s3_endpoint() -> str:
    """``http://127.0.0.1:PORT`` of a session-wide moto S3 server (skips without moto)."""
    return moto_endpoint()


def s3_url(endpoint: str, bucket: str = "colmz-test") -> str:
    """A fresh ``s3://`` store URL (new prefix) on the moto server at ``endpoint``."""
    return f"s3://{bucket}/{uuid.uuid4().hex[:12]}?endpoint_override={endpoint}&region=us-east-1"


def make_location(kind: str, tmp_dir: str | os.PathLike) -> Location:
    """A fresh, empty store of ``kind`` (one of :data:`BACKENDS`); local files go in a new
    directory under ``tmp_dir``. Starts the servers a kind needs on first use."""
    if kind not in BACKENDS:
        raise ValueError(f"unknown backend kind {kind!r}; one of {BACKENDS}")
    if kind == "mem":
        return open_location(f"mem://factory-{os.getpid()}-{uuid.uuid4().hex}")
    local = pathlib.Path(tempfile.mkdtemp(prefix=f"{kind.replace('+', '-')}-", dir=tmp_dir))
    if kind == "local":
        return open_location(str(local / "s"))
    if kind == "local+postgres":
        return open_location(str(local / "s"), consensus=fresh_schema_url(postgres_url()))
    if kind == "s3+postgres":
        return open_location(s3_url(moto_endpoint()), consensus=fresh_schema_url(postgres_url()))
    return open_location(s3_url(moto_endpoint()), consensus=f"sqlite:///{local}/c.sqlite")


@pytest.fixture(scope="session")
def location_factory(tmp_path_factory):
    """``make(kind) -> Location``: a fresh, empty store of one of :data:`BACKENDS`."""
    root = tmp_path_factory.mktemp("stores")
    return lambda kind: make_location(kind, root)
