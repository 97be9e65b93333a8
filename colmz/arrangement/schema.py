"""The arrangement's schema: data-column specs, their JSON form in the durable state, and
their normalization from the forms the API accepts (``pa.Schema``, mapping, specs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa

from colmz.arrangement.errors import CorruptMeta
from colmz.order import ColumnSpec

__all__ = ["describe_schema", "normalize_schema", "schema_from_json", "schema_to_json"]


def schema_to_json(schema: Sequence[ColumnSpec] | None) -> dict | None:
    """The schema as a JSON-able dict (Arrow IPC bytes in base64, plus readable names)."""
    if schema is None:
        return None
    import base64

    s = pa.schema([pa.field(c.name, c.type) for c in schema])
    return {
        "arrow": base64.b64encode(s.serialize().to_pybytes()).decode(),
        "columns": [[c.name, str(c.type)] for c in schema],
    }


def schema_from_json(doc) -> tuple[ColumnSpec, ...] | None:
    """Inverse of :func:`schema_to_json`."""
    if doc is None:
        return None
    import base64

    try:
        s = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(doc["arrow"])))
    except (KeyError, TypeError, ValueError, pa.ArrowException) as e:
        raise CorruptMeta(f"arrangement state has an unreadable schema {doc!r}: {e}") from None
    return tuple(ColumnSpec(f.name, f.type) for f in s)


def normalize_schema(schema) -> tuple[ColumnSpec, ...] | None:
    """A schema argument as data-column specs: a ``pa.Schema`` (``time``/``diff`` fields are
    dropped), a mapping name -> Arrow type, or a sequence of ``ColumnSpec``/``(name, type)``."""
    if schema is None:
        return None
    if isinstance(schema, pa.Schema):
        specs = [ColumnSpec(f.name, f.type) for f in schema if f.name not in ("time", "diff")]
    elif isinstance(schema, Mapping):
        specs = [ColumnSpec(str(n), t) for n, t in schema.items()]
    else:
        try:
            specs = [s if isinstance(s, ColumnSpec) else ColumnSpec(str(s[0]), s[1]) for s in schema]
        except (TypeError, IndexError):
            raise TypeError(f"schema must be a pyarrow.Schema, a mapping or a sequence of "
                            f"(name, type); got {schema!r}") from None
    for s in specs:
        if not isinstance(s.type, pa.DataType):
            raise TypeError(f"schema column {s.name!r} has type {s.type!r}, not a pyarrow DataType")
        s.kind  # noqa: B018 - raises TypeError for unsupported types, naming the column
        if s.name in ("time", "diff"):
            raise ValueError(f"data column named {s.name!r} clashes with the {s.name} column")
    return tuple(specs)


def describe_schema(schema) -> str:
    """The schema as ``{name: type, ...}`` for messages."""
    if schema is None:
        return "(no schema yet)"
    return "{" + ", ".join(f"{s.name}: {s.type}" for s in schema) + "}"
