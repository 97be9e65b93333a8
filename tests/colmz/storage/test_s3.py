"""S3Blob against moto: an unreachable endpoint, prefixes, and listing."""

from __future__ import annotations

import pytest
from storage_servers import free_port, s3_url

from colmz.storage import Determinate, Indeterminate
from colmz.storage.s3 import S3Blob


def test_prefixes_isolate_stores(s3_endpoint):
    a, b = S3Blob.from_url(s3_url(s3_endpoint)), S3Blob.from_url(s3_url(s3_endpoint))
    a.set("x/1", b"a")
    assert b.list_keys() == [] and b.get("x/1") is None
    a.delete("x/1")
    assert a.list_keys() == []  # no directory marker left behind is listed as a key


def test_unreachable_endpoint_is_a_storage_error():
    url = f"s3://b/p?endpoint_override=http://127.0.0.1:{free_port()}&connect_timeout=1&request_timeout=1&region=us-east-1"
    with pytest.raises(Determinate, match="cannot reach bucket 'b'"):
        S3Blob.from_url(url)
    import pyarrow.fs as pafs

    blob = S3Blob(pafs.S3FileSystem(endpoint_override=f"127.0.0.1:{free_port()}", scheme="http",
                                    connect_timeout=1, request_timeout=1, region="us-east-1",
                                    retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1)), "b", "p")
    with pytest.raises(Determinate, match="blob get 'k'"):
        blob.get("k")
    with pytest.raises(Indeterminate, match="blob set 'k'"):
        blob.set("k", b"v")
    with pytest.raises(Determinate, match="blob list"):
        blob.list_keys()


def test_bad_urls():
    with pytest.raises(ValueError, match="must be s3://bucket/prefix"):
        S3Blob.from_url("s3:///nobucket")
    with pytest.raises(ValueError, match="scheme must be http or https, got 'ftp'"):
        S3Blob.from_url("s3://b/p?endpoint_override=ftp://127.0.0.1:1")
