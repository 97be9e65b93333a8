"""Progress of long work: the callback convention and a one-line terminal bar.

The convention, shared by every colmz call that can take long (``Arrangement.maintain``,
``colmz.warmup``, large consolidations): the call accepts ``progress=None`` or a callable
``progress(done, total, label)`` and calls it as it goes, never printing itself.

- ``done`` counts up (never down) in the call's own unit -- updates read, kernels compiled,
  steps -- and the last call of a finished call has ``done == total``.
- ``total`` is the work known at the time of the call; it may grow when the work reveals more
  (a compaction that cascades) but is never below ``done``.
- ``label`` names what is being done right now (``"drain"``, ``"compact"``...), short, for a
  person to read.

A callback that raises aborts the call as any other error does (the structure is left as the
call's own errors leave it), so a notebook can interrupt a long call from its callback.

:class:`Bar` renders such calls as a single line redrawn with ``"\\r"`` on a terminal:
stage label, a bar, ``done/total``, the rate and the time left. It is itself a callback, so
``arr.maintain(progress=Bar())`` shows a bar. It writes nothing when its stream is not a
terminal (``isatty()`` false: a pipe, a file, a notebook's captured stream) or when quiet, so
callers never need to check that themselves; what a caller prints instead on a non-terminal
is its own decision (the ``colmz`` CLI prints one line per finished phase).

It is plain Python and thread-safe (the CLI feeds it from a Spark status thread and from the
main thread). tqdm is not needed; :func:`tqdm_callback` adapts the convention to a tqdm bar
for those who prefer it.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

__all__ = ["Bar", "ProgressCallback", "check_progress", "format_duration", "tqdm_callback"]

#: The type of a progress callback: ``progress(done, total, label)``.
ProgressCallback = Callable[[int, int, str], None]


def check_progress(progress: Any, name: str = "progress") -> ProgressCallback | None:
    """Return ``progress`` when it is ``None`` or callable; raise ``TypeError`` naming ``name``.

    Calls check their callback up front, before they change anything.

    >>> check_progress(None) is None
    True
    >>> check_progress(3)
    Traceback (most recent call last):
    ...
    TypeError: progress must be None or a callable progress(done, total, label), got 3
    """
    if progress is not None and not callable(progress):
        raise TypeError(f"{name} must be None or a callable progress(done, total, label), got {progress!r}")
    return progress


def format_duration(seconds: float) -> str:
    """``seconds`` as ``m:ss`` (or ``h:mm:ss`` from an hour on).

    >>> format_duration(75.4), format_duration(3725)
    ('1:15', '1:02:05')
    """
    s = max(0, int(round(seconds)))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _count(n: float) -> str:
    """A compact count: 950, 12.3k, 4.56M."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= div:
            return f"{n / div:.3g}{suffix}"
    return f"{n:.0f}" if float(n).is_integer() else f"{n:.3g}"


class Bar:
    """A progress callback drawing one line, redrawn in place, on a terminal.

    Parameters
    ----------
    stream
        Where to draw (default ``sys.stderr``). Nothing is written unless
        ``stream.isatty()`` is true.
    quiet
        Draw nothing at all.
    width
        Characters of the bar itself; the whole line is cut to the terminal's width.
    min_interval
        Seconds between redraws (a change of label, and reaching ``total``, always redraw).
    clock
        The time source (for tests).

    Each call draws ``label [#####-----] done/total  rate/s  ETA m:ss``; the rate and the ETA
    are measured since the label last changed. ``total <= 0`` (unknown) draws the label,
    ``done`` and the time elapsed without a bar. :meth:`close` ends the line (or wipes it with
    ``clear=True``); use the bar as a context manager to close it also on errors.

    Examples
    --------
    >>> import io
    >>> class Tty(io.StringIO):
    ...     def isatty(self): return True
    >>> out = Tty()
    >>> with Bar(out, width=10, min_interval=0) as bar:
    ...     for i in range(5):
    ...         bar(i, 4, "merge")
    >>> out.getvalue().count("\\r") >= 4, "4/4" in out.getvalue()
    (True, True)
    >>> quiet = Tty(); Bar(quiet, quiet=True)(1, 2, "x"); quiet.getvalue()
    ''
    """

    def __init__(self, stream: IO[str] | None = None, *, quiet: bool = False, width: int = 24,
                 min_interval: float = 0.1, clock: Callable[[], float] = time.monotonic):
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ValueError(f"width must be a positive int, got {width!r}")
        self.stream = sys.stderr if stream is None else stream
        self.quiet = quiet
        self.width = width
        self.min_interval = min_interval
        self.clock = clock
        isatty = getattr(self.stream, "isatty", None)
        #: Whether this bar draws at all (a terminal, and not quiet).
        self.enabled = not quiet and bool(isatty and isatty())
        self._lock = threading.Lock()
        self._label: str | None = None
        self._start = 0.0
        self._start_done = 0
        self._last_draw = float("-inf")
        self._shown = 0  # characters of the line on screen now
        self._text = ""  # the frame on screen now

    def __call__(self, done: int, total: int, label: str = "") -> None:
        if not self.enabled:
            return
        with self._lock:
            now = self.clock()
            if label != self._label:
                self._label, self._start, self._start_done = label, now, done
            elif now - self._last_draw < self.min_interval and not (total > 0 and done >= total):
                return
            self._last_draw = now
            self._draw(self.frame(done, total, label, now - self._start, done - self._start_done))

    def frame(self, done: int, total: int, label: str, elapsed: float, progressed: int) -> str:
        """The text of one frame (without the ``"\\r"``)."""
        parts = [label] if label else []
        rate = progressed / elapsed if elapsed > 0 and progressed > 0 else None
        if total > 0:
            frac = min(max(done / total, 0.0), 1.0)
            fill = int(frac * self.width)
            parts.append("[" + "#" * fill + "-" * (self.width - fill) + "]")
            parts.append(f"{_count(done)}/{_count(total)}")
            if rate is not None:
                parts.append(f"{_count(rate)}/s")
                parts.append(f"ETA {format_duration(max(total - done, 0) / rate)}")
        else:
            if done:
                parts.append(_count(done))
            parts.append(format_duration(elapsed))
        return "  ".join(parts)

    def _draw(self, text: str) -> None:
        cols = shutil.get_terminal_size((100, 24)).columns - 1
        text = text[:max(cols, 10)]
        if text == self._text and self._shown:
            return  # the same frame again (a polling caller): nothing to redraw
        self._text = text
        # pad with spaces over what the previous frame left on screen
        pad = " " * max(self._shown - len(text), 0)
        self.stream.write("\r" + text + pad)
        self.stream.flush()
        self._shown = len(text)

    def note(self, message: str) -> None:
        """Print ``message`` on its own line above the bar (a terminal only)."""
        if not self.enabled:
            return
        with self._lock:
            self._wipe()
            self.stream.write(message + "\n")
            self.stream.flush()
            self._label = None  # redraw on the next call

    def _wipe(self) -> None:
        if self._shown:
            self.stream.write("\r" + " " * self._shown + "\r")
            self._shown = 0

    def close(self, clear: bool = False) -> None:
        """End the bar's line: keep the last frame (a newline) or wipe it (``clear=True``)."""
        if not self.enabled:
            return
        with self._lock:
            if clear:
                self._wipe()
            elif self._shown:
                self.stream.write("\n")
                self._shown = 0
            self.stream.flush()
            self._label = None

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def tqdm_callback(bar: Any) -> ProgressCallback:
    """A progress callback driving a ``tqdm`` bar (tqdm is not a colmz dependency).

    >>> class FakeTqdm:
    ...     n = total = 0
    ...     desc = ""
    ...     def set_description_str(self, s, refresh=False): self.desc = s
    ...     def refresh(self): pass
    >>> t = FakeTqdm(); cb = tqdm_callback(t); cb(3, 10, "drain"); (t.n, t.total, t.desc)
    (3, 10, 'drain')
    """

    def progress(done: int, total: int, label: str) -> None:
        bar.total = total
        bar.n = done
        if label != bar.desc:
            bar.set_description_str(label, refresh=False)
        bar.refresh()

    return progress
