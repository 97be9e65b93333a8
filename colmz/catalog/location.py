"""Where a catalog may be created: never inside another store.

A local catalog location is refused, before anything is created, when it lies inside
another store -- in its directory, or in its blob, where the catalog's files would be taken
for that store's (:class:`NestedStore`) -- and, opening with ``create=False``, when it holds
no store. A store is recognised by its SQLite consensus, or by a blob holding an
arrangement's or a catalog's identity (a store whose consensus lives elsewhere).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["NestedStore", "check_catalog_location"]


class NestedStore(ValueError):
    """A new catalog would lie inside another store: in its directory or its blob."""


def _is_store_dir(path: Path) -> bool:
    # a local store: its SQLite consensus, or a blob holding an arrangement's or a catalog's
    # identity (a store whose consensus lives elsewhere)
    blob = path / "blob"
    return (path / "consensus.sqlite").is_file() or (blob.is_dir() and any(blob.glob("*/identity.json")))


def check_catalog_location(url: str, *, consensus: str | None = None, create: bool = True) -> None:
    """Refuse, before anything is created, a local catalog location that would lie inside
    another store (:class:`NestedStore`, naming it: in its directory, or in its blob, where
    a catalog's files would be taken for that store's), and with ``create=False`` one that
    holds no store (``FileNotFoundError``). An existing store at ``url`` itself is opened as
    it is. Other schemes are not checked here.

    >>> import tempfile, colmz
    >>> d = tempfile.mkdtemp()
    >>> _ = colmz.Catalog(d)
    >>> check_catalog_location(d)
    >>> check_catalog_location(d + "/blob")
    Traceback (most recent call last):
    ...
    colmz.catalog.location.NestedStore: catalog location '...' lies inside the store at '...': ...
    """
    from colmz.storage.url import local_path

    path = local_path(url)
    if path is None:
        return
    path = path.absolute()
    if _is_store_dir(path):
        return
    if not create and consensus is None:
        raise FileNotFoundError(f"no catalog at {url!r} (create=False: nothing was created)")
    for above in path.parents:
        if _is_store_dir(above):
            raise NestedStore(
                f"catalog location {url!r} lies inside the store at {str(above)!r}: a catalog "
                "there would write into that store's directory or blob; choose a location "
                "outside it (nothing was created)"
            )
