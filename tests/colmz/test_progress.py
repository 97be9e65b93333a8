"""colmz.progress: the terminal bar, and the progress callback of Arrangement.maintain."""

from __future__ import annotations

import io
from collections import Counter

import pytest

import colmz
from colmz.progress import Bar, check_progress, format_duration, tqdm_callback


class Stream(io.StringIO):
    """A text stream that says whether it is a terminal."""

    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def frames(text: str) -> list[str]:
    """The frames a bar drew: the text between carriage returns, without padding."""
    return [f.rstrip() for f in text.split("\r") if f.strip()]


def test_bar_draws_carriage_return_frames_on_a_terminal():
    out, clock = Stream(True), Clock()
    bar = Bar(out, width=10, min_interval=0, clock=clock)
    for done in range(0, 101, 25):
        bar(done, 100, "compact")
        clock.t += 2.0
    bar.close()
    text = out.getvalue()
    assert text.count("\r") == 5 and text.endswith("\n") and text.count("\n") == 1
    got = frames(text.rstrip("\n"))
    assert got[0] == "compact  [----------]  0/100"  # no rate before anything moved
    assert got[2].startswith("compact  [#####-----]  50/100  12.5/s  ETA 0:04")
    assert got[-1].startswith("compact  [##########]  100/100")


def test_bar_writes_nothing_to_a_non_terminal_or_when_quiet():
    for out, quiet in ((Stream(False), False), (Stream(True), True), (io.StringIO(), False)):
        bar = Bar(out, quiet=quiet, min_interval=0)
        for done in range(5):
            bar(done, 4, "drain")
        bar.note("a message")
        bar.close()
        assert out.getvalue() == ""
        assert not bar.enabled


def test_bar_throttles_but_always_draws_a_new_label_and_the_end():
    out, clock = Stream(True), Clock()
    bar = Bar(out, width=4, min_interval=1.0, clock=clock)
    bar(0, 10, "a")          # drawn: new label
    bar(3, 10, "a")          # too soon
    bar(4, 10, "b")          # drawn: new label
    clock.t = 0.5
    bar(5, 10, "b")          # too soon
    bar(10, 10, "b")         # drawn: the end
    clock.t = 2.0
    bar(10, 10, "c")         # drawn
    got = frames(out.getvalue())
    assert [f.split()[0] for f in got] == ["a", "b", "b", "c"]
    assert "10/10" in got[2]


def test_bar_pads_over_a_longer_previous_frame_and_clears():
    out = Stream(True)
    bar = Bar(out, width=4, min_interval=0)
    bar(1, 2, "a rather long label")
    bar(2, 2, "x")
    first, second = out.getvalue().split("\r")[1:]
    assert len(second) == len(first)  # the shorter frame blanks the rest of the longer one
    bar.close(clear=True)
    assert out.getvalue().endswith("\r") and "\n" not in out.getvalue()


def test_bar_unknown_total_and_note():
    out, clock = Stream(True), Clock()
    bar = Bar(out, min_interval=0, clock=clock)
    bar(0, 0, "reading events")
    clock.t = 65
    bar(0, 0, "reading events")
    bar.note("20000 events")
    assert frames(out.getvalue())[-2] == "reading events  1:05"
    assert "20000 events\n" in out.getvalue()


def test_bar_rejects_a_bad_width():
    with pytest.raises(ValueError, match="width"):
        Bar(Stream(True), width=0)


def test_helpers():
    assert format_duration(0) == "0:00" and format_duration(59.6) == "1:00"
    assert check_progress(print) is print
    with pytest.raises(TypeError, match="progress must be None or a callable"):
        check_progress("bar")

    class Tqdm:
        n = total = 0
        desc = ""
        refreshed = 0

        def set_description_str(self, s, refresh=False):
            self.desc = s

        def refresh(self):
            self.refreshed += 1

    t = Tqdm()
    cb = tqdm_callback(t)
    cb(1, 5, "x")
    cb(5, 5, "x")
    assert (t.n, t.total, t.desc, t.refreshed) == (5, 5, "x", 2)


# --------------------------------------------------------------------- Arrangement.maintain


def filled(url: str, batches: int = 24, rows: int = 200) -> tuple[colmz.Arrangement, Counter]:
    """An arrangement with ``batches`` sealed batches, some drained and most not, plus two
    unsealed updates after the seal, and the oracle of what it holds at the seal - 1."""
    a = colmz.Arrangement.open(url, part_rows=64)
    oracle = Counter()
    for t in range(batches):
        keys = [(t * 7 + i) % 97 for i in range(rows)]
        a.write(colmz.Updates({"k": keys}, time=[t] * rows, diff=[1] * rows))
        oracle.update(keys)
        a.seal(t + 1)
        if t % 3 == 0:
            a.maintain(fuel=1)  # a drain, and barely a start of merging: work left behind
    for t in (batches, batches + 1):
        a.write(colmz.Updates({"k": [1, 2]}, time=[t, t], diff=[1, 1]))
    return a, oracle


def contents(a: colmz.Arrangement, as_of: int) -> dict:
    return {k: d for k, _t, d in a.read(as_of).to_pylist()}


def check_calls(calls: list[tuple]) -> None:
    done = [c[0] for c in calls]
    assert done == sorted(done), "done went down"
    assert all(0 <= d <= t for d, t, _ in calls)
    assert calls[-1][0] == calls[-1][1]


def test_maintain_reports_monotone_progress_reaching_the_total(tmp_path):
    a, oracle = filled(str(tmp_path / "a"))
    b, _ = filled(str(tmp_path / "b"))
    calls = []
    report = a.maintain(progress=lambda d, t, label: calls.append((d, t, label)))
    check_calls(calls)
    assert calls[-1] == (report["rows"], report["rows"], "done")
    labels = {c[2] for c in calls}
    assert {"drain", "compact", "done"} <= labels <= {"drain", "trim", "compact", "done"}
    assert len([c for c in calls if c[2] == "compact"]) > report["compactions"]  # sliced merges
    # reporting does not change the work: the same steps as without a callback
    assert b.maintain() == report
    assert [(x.desc, x.level, x.len) for x in a.trace_batches] == [(x.desc, x.level, x.len) for x in b.trace_batches]
    assert contents(a, 23) == dict(oracle)


def test_maintain_progress_within_fuel(tmp_path):
    a, oracle = filled(str(tmp_path / "a"))
    b, _ = filled(str(tmp_path / "b"))
    for _ in range(200):
        calls = []
        report = a.maintain(fuel=700, progress=lambda d, t, label, calls=calls: calls.append((d, t, label)))
        check_calls(calls)
        assert all(t <= max(700, d) for d, t, _ in calls[:-1])  # the total stays within the fuel
        assert calls[-1][2] == ("merging" if report["merging"] else "done")
        assert b.maintain(fuel=700) == report
        if not any(report[k] for k in ("drains", "trims", "compactions")) and not report["merging"]:
            break
    assert [(x.desc, x.level) for x in a.trace_batches] == [(x.desc, x.level) for x in b.trace_batches]
    assert contents(a, 23) == dict(oracle)


def test_maintain_rejects_a_bad_callback_unchanged_and_a_raising_one_aborts(tmp_path):
    a, oracle = filled(str(tmp_path / "a"))
    before = (a.seqno, a.meta())
    with pytest.raises(TypeError, match="progress must be None or a callable"):
        a.maintain(progress=42)
    assert (a.seqno, a.meta()) == before

    class Stop(Exception):
        pass

    def stop(done, total, label):
        if label == "compact" and done > 0:
            raise Stop

    with pytest.raises(Stop):
        a.maintain(progress=stop)
    # what was committed before the callback raised is a consistent state
    reopened = colmz.Arrangement.open(str(tmp_path / "a"), create=False)
    assert contents(reopened, 23) == dict(oracle)
    a.maintain()
    assert contents(a, 23) == dict(oracle)
    assert set(a.store.list_keys(a.prefix)) == set(a.referenced_keys())


def test_maintain_feeds_a_bar(tmp_path):
    a, _ = filled(str(tmp_path / "a"))
    out = Stream(True)
    with Bar(out, min_interval=0) as bar:
        a.maintain(progress=bar)
    got = frames(out.getvalue().rstrip("\n"))
    assert got[0].startswith("drain") and got[-1].startswith("done")
    assert any(f.startswith("compact  [") for f in got)


def test_bar_does_not_redraw_the_same_frame():
    out, clock = Stream(True), Clock()
    bar = Bar(out, min_interval=0, clock=clock)
    for _ in range(5):
        bar(0, 0, "waiting")  # a poller calling within the same second
    assert out.getvalue().count("\r") == 1
    clock.t = 1.0
    bar(0, 0, "waiting")
    assert out.getvalue().count("\r") == 2
