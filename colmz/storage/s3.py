"""S3Blob: a Blob in an S3-compatible object store, through ``pyarrow.fs.S3FileSystem``.

Why this client
---------------
pyarrow is already a core dependency of colmz, and its ``S3FileSystem`` (the AWS C++ SDK
underneath) covers all a Blob needs: whole-object put and get, delete, prefix listing,
``endpoint_override`` for S3-compatible stores, region, scheme and retry settings. The same
filesystem object hands straight to ``pyarrow.dataset`` / ``pyarrow.parquet`` to read parts
without copying through Python, so an S3 store needs no new dependency. boto3 would add a
package (and a second HTTP stack) for nothing this module uses; s3fs adds fsspec and aiobotocore.
It is tested against moto's S3 server on loopback (``tests/storage_servers.py``).

Design
------
A key ``k`` is the object ``bucket/prefix/k``. S3 makes a completed upload visible whole and
at once (single PUT or completed multipart upload), and reads after writes are strongly
consistent, so ``set`` is atomic and durable when it returns, as the Blob contract asks.
Credentials come from the standard AWS sources (``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY`` environment, config files, instance metadata); they never appear in
a store URL.

URL: ``s3://bucket/prefix?endpoint_override=http://host:port&region=us-east-1`` (query
options: ``endpoint_override``, ``region``, ``scheme``, ``connect_timeout``,
``request_timeout``; a scheme given in ``endpoint_override`` sets ``scheme``).

Errors: get/list failures are :class:`~colmz.storage.base.Determinate`; a failed ``set`` or
``delete`` is :class:`~colmz.storage.base.Indeterminate` (the request may have reached the
store) -- harmless for immutable parts under fresh keys: retry the same bytes, or leave the
key to garbage collection.
"""

from __future__ import annotations

import urllib.parse

from colmz.storage.base import Determinate, Indeterminate, check_key

try:
    from pyarrow import fs as pafs

    pafs.S3FileSystem  # noqa: B018  (a pyarrow built without S3 lacks it)
except (ImportError, AttributeError) as e:  # pragma: no cover - depends on the pyarrow build
    raise ImportError(
        "this pyarrow build has no S3 support (pyarrow.fs.S3FileSystem); install the PyPI "
        "pyarrow wheel: pip install --force-reinstall pyarrow"
    ) from e

__all__ = ["S3Blob"]

_OPTIONS = ("endpoint_override", "region", "scheme", "connect_timeout", "request_timeout")


class S3Blob:
    """A Blob under ``s3://bucket/prefix`` on the pyarrow filesystem ``filesystem``.

    Use :meth:`from_url` to build one from a store URL. ``filesystem`` is public so that
    outside readers can open parts: ``pyarrow.dataset.dataset([blob.path_of(k) ...],
    filesystem=blob.filesystem)``.

    Examples
    --------
    With a server (``tests/storage_servers.py`` starts one on loopback):

    >>> b = S3Blob.from_url("s3://bucket/pre?endpoint_override=http://127.0.0.1:9000")  # doctest: +SKIP
    >>> b.set("parts/p1", b"abc"); b.get("parts/p1")  # doctest: +SKIP
    b'abc'

    Names need no server:

    >>> b = S3Blob(pafs.S3FileSystem(region="us-east-1"), "bucket", "pre")
    >>> b.url_of("parts/p1"), b.path_of("parts/p1")
    ('s3://bucket/pre/parts/p1', 'bucket/pre/parts/p1')
    >>> S3Blob.from_url("s3://bucket/pre?colour=red")
    Traceback (most recent call last):
    ...
    ValueError: unknown S3 URL option 'colour' in 's3://bucket/pre?colour=red' (known: endpoint_override, region, scheme, connect_timeout, request_timeout)
    """

    def __init__(self, filesystem: pafs.FileSystem, bucket: str, prefix: str = "") -> None:
        if not bucket or "/" in bucket or not bucket.strip("."):
            raise ValueError(f"S3 bucket name {bucket!r} must be non-empty, have no '/' and not be "
                             "only dots")
        prefix = prefix.strip("/")
        if prefix:
            check_key(prefix)
        self.filesystem = filesystem
        self.bucket = bucket
        self.prefix = prefix
        self._base = f"{bucket}/{prefix}" if prefix else bucket

    @classmethod
    def from_url(cls, url: str, *, create: bool = True) -> S3Blob:
        """Parse ``s3://bucket/prefix?options`` (see the module docstring); with ``create``,
        create the bucket when it is missing, else raise ``FileNotFoundError`` naming it."""
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise ValueError(f"S3 store URL {url!r} must be s3://bucket/prefix")
        if not parsed.netloc.strip("."):
            # urlsplit takes "." and ".." for a host: refuse before any request is made
            raise ValueError(f"S3 store URL {url!r} names the bucket {parsed.netloc!r}; a bucket "
                             "name is not '.' or '..' (s3://bucket/prefix)")
        if "@" in parsed.netloc:
            raise ValueError(
                f"S3 store URL {url!r} holds credentials; pass them through the AWS "
                f"environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) instead"
            )
        query = dict(urllib.parse.parse_qsl(parsed.query, keep_blank_values=True))
        unknown = sorted(set(query) - set(_OPTIONS))
        if unknown:
            raise ValueError(
                f"unknown S3 URL option {unknown[0]!r} in {url!r} (known: {', '.join(_OPTIONS)})"
            )
        kwargs: dict = {"retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=3)}
        endpoint = query.get("endpoint_override")
        if endpoint:
            if "://" in endpoint:
                scheme, _, rest = endpoint.partition("://")
                kwargs["scheme"] = scheme
                endpoint = rest
            kwargs["endpoint_override"] = endpoint
        if query.get("scheme"):
            kwargs["scheme"] = query["scheme"]
        if kwargs.get("scheme") not in (None, "http", "https"):
            raise ValueError(f"S3 scheme must be http or https, got {kwargs['scheme']!r} in {url!r}")
        if query.get("region"):
            kwargs["region"] = query["region"]
        for name in ("connect_timeout", "request_timeout"):
            if name in query:
                try:
                    kwargs[name] = float(query[name])
                except ValueError:
                    raise ValueError(f"S3 URL option {name}={query[name]!r} is not a number") from None
        filesystem = pafs.S3FileSystem(allow_bucket_creation=create, **kwargs)
        blob = cls(filesystem, parsed.netloc, urllib.parse.unquote(parsed.path))
        blob._ensure_bucket(create, url)
        return blob

    def _ensure_bucket(self, create: bool, url: str) -> None:
        try:
            info = self.filesystem.get_file_info(self.bucket)
        except OSError as e:
            raise Determinate(f"S3 store {url!r}: cannot reach bucket {self.bucket!r}: {e}") from e
        if info.type == pafs.FileType.Directory:
            return
        if not create:
            raise FileNotFoundError(f"S3 bucket {self.bucket!r} of {url!r} does not exist")
        try:
            self.filesystem.create_dir(self.bucket)
        except OSError as e:
            raise Determinate(f"S3 store {url!r}: cannot create bucket {self.bucket!r}: {e}") from e

    def __repr__(self) -> str:
        return f"S3Blob('s3://{self._base}')"

    def path_of(self, key: str) -> str:
        """``bucket/prefix/key``: the path of ``key`` on :attr:`filesystem`."""
        return f"{self._base}/{check_key(key)}"

    def url_of(self, key: str) -> str:
        """``s3://bucket/prefix/key`` (readers need the store's endpoint and credentials too)."""
        return "s3://" + self.path_of(key)

    def open_input(self, key: str):
        """A random-access file for reading ``key`` (ranged GETs), or None when missing."""
        path = self.path_of(key)
        try:
            return self.filesystem.open_input_file(path)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise Determinate(f"blob open {key!r} (s3://{path}): {e}") from e

    def get(self, key: str) -> bytes | None:
        path = self.path_of(key)
        try:
            with self.filesystem.open_input_stream(path) as f:
                return f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise Determinate(f"blob get {key!r} (s3://{path}): {e}") from e

    def set(self, key: str, value: bytes | memoryview) -> None:
        path = self.path_of(key)
        try:
            with self.filesystem.open_output_stream(path) as f:
                f.write(value)
        except OSError as e:
            raise Indeterminate(f"blob set {key!r} (s3://{path}): {e}") from e

    def delete(self, key: str) -> None:
        path = self.path_of(key)
        try:
            self.filesystem.delete_file(path)
        except FileNotFoundError:
            return
        except OSError as e:
            raise Indeterminate(f"blob delete {key!r} (s3://{path}): {e}") from e

    def list_keys(self, prefix: str = "") -> list[str]:
        # List under the deepest "directory" the prefix names entirely, then filter.
        head = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        base = f"{self._base}/{check_key(head)}" if head else self._base
        selector = pafs.FileSelector(base, recursive=True, allow_not_found=True)
        try:
            infos = self.filesystem.get_file_info(selector)
        except OSError as e:
            raise Determinate(f"blob list {prefix!r} (s3://{base}): {e}") from e
        skip = len(self._base) + 1
        return sorted(
            key
            for info in infos
            if info.type == pafs.FileType.File
            for key in (info.path[skip:],)
            if key.startswith(prefix)
        )
