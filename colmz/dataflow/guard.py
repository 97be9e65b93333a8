"""``ErrorGuard``: an error of the view while its input holds a row, as Materialize keeps
errors beside a dataflow's rows.

Design
------
Materialize evaluates a view into two collections, its rows and its errors: a row that
raises (a scalar subquery of more than one row, ``src/sql/src/plan/lowering.rs``) becomes an
error update, the write that caused it still commits, and reading the view reports the
error while any is held -- once the cause is retracted the error is too, and the view reads
again. colmz keeps a view's errors as the rows of the ``ErrorGuard`` operators of its plan:
each is fed the rows that mean its error (a global count's row past one), keeps their
multiplicities in a :class:`~colmz.dataflow.KeyedArrangement` (exported and restored with
the view's other state, ``colmz.dataflow.state``) and outputs nothing -- it stands in a
``Union`` so that the pipeline steps it, adding no row. :attr:`ErrorGuard.held` says
whether the error holds after the last step;
:class:`colmz.dataflow.maintained.MaintainedView` reads it after each step.

Invariant: ``held`` is whether the input's integrated multiplicities hold a row with a
positive count; the output is always empty.
"""

from __future__ import annotations

from colmz.dataflow.keyed import KeyedArrangement
from colmz.dataflow.step import Clock, as_schema, check_delta
from colmz.ops import consolidate
from colmz.updates import Updates

__all__ = ["MORE_THAN_ONE_ROW", "ErrorGuard", "error_at"]

#: PostgreSQL's (and Materialize's) error of a scalar subquery returning more than one row.
MORE_THAN_ONE_ROW = "more than one row returned by a subquery used as an expression"


class ErrorGuard:
    """Keeps its input's rows; :attr:`held` (an error of the view) while any is held.

    Parameters
    ----------
    schema : the input's columns
    output : the (always empty) output's columns
    message : the error, in PostgreSQL's words

    Examples
    --------
    >>> import colmz, pyarrow as pa
    >>> g = ErrorGuard({"n": pa.int64()}, {"x": pa.string()}, "more than one row")
    >>> g.step(1, colmz.Updates({"n": [2]}, time=[1], diff=[1])).to_pylist(), g.held
    ([], True)
    >>> g.step(2, colmz.Updates({"n": [2]}, time=[2], diff=[-1])).to_pylist(), g.held
    ([], False)
    """

    ROLLBACK_FIELDS = ("_rows", "_clock")

    def __init__(self, schema, output, message: str):
        self.schema = as_schema(schema, "schema")
        self.output = as_schema(output, "output")
        if not isinstance(message, str) or not message:
            raise ValueError(f"message must be a non-empty str, got {message!r}")
        self.message = message
        self._rows = KeyedArrangement(self.schema, [c.name for c in self.schema])
        self._clock = Clock()

    def step(self, time, delta: Updates) -> Updates:
        """Keep ``delta``'s rows; the output's change (none) at ``time``."""
        time = self._clock.check(time)
        delta = consolidate(check_delta(delta, self.schema, time))
        if len(delta):
            self._rows.insert_checked(time, delta)
        self._clock.advance(time)
        return Updates.empty(self.output)

    @property
    def held(self) -> bool:
        """Whether the input holds a row (the error holds): read from the rows kept, so a
        roll back or a durable restore of them is all the state there is."""
        rows = self._rows.snapshot()
        return bool(len(rows)) and bool((rows.diff > 0).any())


def error_at(history: tuple[tuple[int, str | None], ...], time: int) -> str | None:
    """The error a view's ``history`` -- ``(time, message or None)`` at each time its error
    changed, in time order -- holds as of ``time``, or ``None``.

    >>> error_at(((3, "boom"), (5, None)), 4), error_at(((3, "boom"), (5, None)), 5)
    ('boom', None)
    """
    found = None
    for t, e in history:
        if t > time:
            break
        found = e
    return found
