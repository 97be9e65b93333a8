"""Storage test fixtures: the real servers of ``tests/storage_servers.py``."""

from storage_servers import location_factory, pg_url, s3_endpoint  # noqa: F401
