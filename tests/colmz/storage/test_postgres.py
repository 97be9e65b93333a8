"""PostgresConsensus against a real server: lost connections, schema isolation, errors."""

from __future__ import annotations

import pytest
from storage_servers import fresh_schema_url

from colmz.storage import Determinate, StateLog, VersionedData

psycopg = pytest.importorskip("psycopg")


def test_a_killed_connection_is_determinate_and_reconnects(pg_url):
    from colmz.storage.postgres import PostgresConsensus

    url = fresh_schema_url(pg_url)
    cons = PostgresConsensus(url)
    assert cons.compare_and_set("k", None, VersionedData(1, b"a"))
    pid = cons._conn().info.backend_pid
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(Determinate, match="consensus read from postgres@127.0.0.1"):
        cons.head("k")
    assert cons.head("k") == VersionedData(1, b"a")  # reconnected
    pid = cons._conn().info.backend_pid
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(Determinate, match="compare_and_set 'k'"):
        cons.compare_and_set("k", 1, VersionedData(2, b"b"))
    assert cons.head("k").seqno == 1  # the failed call (before COMMIT) changed nothing
    assert cons.compare_and_set("k", 1, VersionedData(2, b"b"))


def test_schemas_isolate_stores_and_state_logs_work(pg_url):
    from colmz.storage.postgres import PostgresConsensus

    a, b = PostgresConsensus(fresh_schema_url(pg_url)), PostgresConsensus(fresh_schema_url(pg_url))
    StateLog(a, "meta").commit(None, {"x": 1})
    assert StateLog(b, "meta").load() == (None, None)
    assert a.keys() == ["meta"] and b.keys() == []


def test_unreachable_server_and_bad_urls(pg_url):
    from storage_servers import free_port

    from colmz.storage.postgres import PostgresConsensus

    with pytest.raises(Determinate, match="cannot connect to consensus database"):
        PostgresConsensus(f"postgresql://postgres@127.0.0.1:{free_port()}/x", connect_timeout=2)
    with pytest.raises(ValueError, match="must start with postgresql://"):
        PostgresConsensus("mysql://x")
    with pytest.raises(Determinate, match="colmz_nope"):
        PostgresConsensus(pg_url.rsplit("/", 1)[0] + "/colmz_nope")
