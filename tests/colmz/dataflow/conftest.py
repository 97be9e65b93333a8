"""The view tests' PostgreSQL oracle: one connection on a fresh schema per test module."""

from __future__ import annotations

import pytest
from sql_oracle import fresh_connection


@pytest.fixture(scope="module")
def pg():
    """A PostgreSQL 15 connection (autocommit) on its own fresh schema, for one module."""
    conn = fresh_connection()
    yield conn
    conn.close()
