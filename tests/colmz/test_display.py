"""Tests for ``colmz.display``: the HTML summaries hold the structures' numbers, escaped."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import numpy as np
import pytest

import colmz
from colmz.as_of import Dataflow, Export, select_as_ofs
from colmz.display import as_of_html, correction_html, spine_html, updates_html


class Tables(HTMLParser):
    """Collects the text of every table cell, per table (by class), and checks nesting."""

    def __init__(self, html: str):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.text: list[str] = []
        self.stack: list[str] = []
        self._table = None
        self._cell = None
        self.feed(html)
        self.close()
        assert self.stack == [], f"unclosed tags {self.stack}"

    def handle_starttag(self, tag, attrs):
        self.stack.append(tag)
        if tag == "table":
            self._table = dict(attrs)["class"]
            self.tables[self._table] = []
        elif tag == "tr":
            self.tables[self._table].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "script":
            raise AssertionError("a script tag reached the page")

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, (self.stack, tag)
        self.stack.pop()
        if tag in ("td", "th"):
            self.tables[self._table][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        else:
            self.text.append(data)


def summary(tables, name="colmz-summary"):
    return {row[0]: row[1] for row in tables.tables[name]}


# ------------------------------------------------------------------------------ Updates


def test_updates_html_schema_count_and_head():
    u = colmz.Updates({"k": ["a", "<b>", None], "v": [1.5, 2.0, float("nan")]},
                      time=[0, 1, 2], diff=[1, -1, 2])
    html = updates_html(u)
    t = Tables(html)
    head = t.tables["colmz-head"]
    assert head[0] == ["k", "v", "time", "diff"]
    assert head[1:] == [["'a'", "1.5", "0", "1"], ["'<b>'", "2.0", "1", "-1"],
                        ["None", "nan", "2", "2"]]
    caption = "".join(t.text)
    assert "3 updates" in caption
    assert "k: string" in caption and "v: double" in caption and "time: uint64" in caption
    assert "&lt;b&gt;" in html and "<b>'" not in html


def test_updates_html_truncates_and_counts():
    n = 25
    u = colmz.Updates({"k": np.arange(n)}, time=np.zeros(n, np.uint64), diff=np.ones(n, np.int64))
    t = Tables(updates_html(u, rows=4))
    assert len(t.tables["colmz-head"]) == 1 + 4
    assert [r[0] for r in t.tables["colmz-head"][1:]] == ["0", "1", "2", "3"]
    assert "… 21 more" in "".join(t.text)
    t0 = Tables(updates_html(u.slice(0, 0)))
    assert len(t0.tables["colmz-head"]) == 1 and "0 updates" in "".join(t0.text)
    with pytest.raises(ValueError, match="rows must be a non-negative int, got -1"):
        updates_html(u, rows=-1)


# ------------------------------------------------------------------------------ Correction


def test_correction_html_matches_stats():
    c = colmz.Correction()
    n = 300
    rng = np.random.default_rng(1)
    k = rng.integers(0, 50, n)
    start = rng.integers(0, 20, n)
    c.insert(colmz.Updates({"k": np.concatenate([k, k])},
                           time=np.concatenate([start, start + 10**6]).astype(np.uint64),
                           diff=np.concatenate([np.ones(n, np.int64), -np.ones(n, np.int64)])))
    out = colmz.concat(list(c.updates_before(11)))
    c.insert_negated(out)
    c.advance_since(11)
    s = c.stats()
    t = Tables(correction_html(c))
    sm = summary(t)
    assert sm["updates"] == str(s["updates"]) == str(len(c))
    assert sm["since"] == "11" and sm["boundary (largest read upper)"] == "11"
    assert sm["staged"] == str(s["stage"])
    assert sm["last read's result (emitted)"] == str(s["emitted"])
    occupied = [b for b in s["buckets"] if b["chains"]]
    assert sm["buckets occupied / total"] == f"{len(occupied)} / {len(s['buckets'])}"
    assert sm["bytes"] == str(s["bytes"])
    rows = t.tables["colmz-buckets"]
    assert rows[0] == ["bucket", "bits", "updates", "chain counts"]
    assert rows[1:] == [
        [f"[{b['offset']}, {b['offset'] + 2 ** b['bits']})", str(b["bits"]),
         str(sum(b["chain_counts"])), ", ".join(map(str, b["chain_counts"]))]
        for b in occupied
    ]


def test_correction_html_closed_buffer_and_empty():
    c = colmz.Correction()
    t = Tables(correction_html(c))
    assert "colmz-buckets" not in t.tables and summary(t)["updates"] == "0"
    c.insert(colmz.Updates({"k": [1]}, time=[4], diff=[1]))
    list(c.updates_before(None))
    c.advance_since(None)
    sm = summary(Tables(correction_html(c)))
    assert sm["since"] == "[]" and sm["boundary (largest read upper)"] == "[]"


# ------------------------------------------------------------------------------ Spine


def test_spine_html_layers_and_frontiers():
    s = colmz.Spine(effort=1)
    rng = np.random.default_rng(2)
    for t in range(40):
        s.insert(colmz.Updates({"k": rng.integers(0, 1000, 30)}, time=np.full(30, t, np.uint64),
                               diff=np.ones(30, np.int64)), t, t + 1)
    s.set_logical_compaction(10)
    st = s.stats()
    t = Tables(spine_html(s))
    sm = summary(t)
    assert sm["upper"] == "40" and sm["logical compaction"] == "10"
    assert sm["physical compaction"] == str(s.get_physical_compaction())
    assert sm["updates"] == str(len(s)) and sm["batches"] == str(st["batches"])
    assert sm["merges started / completed"] == f"{st['merges_started']} / {st['merges_completed']}"
    state = {0: "vacant", 1: "single", 2: "merging"}
    assert t.tables["colmz-layers"][1:] == [
        [str(lvl), state[c], str(n), str(2 ** (lvl + 1) if c == 2 else 2**lvl)]
        for lvl, c, n in s.layers()
    ]
    s.close()
    assert summary(Tables(spine_html(s)))["upper"] == "[]"


def test_spine_html_escapes_nothing_dangerous_and_empty_spine():
    t = Tables(spine_html(colmz.Spine()))
    assert "colmz-layers" not in t.tables and summary(t)["batches"] == "0"


# ------------------------------------------------------------------------------ as-of


def test_as_of_html_rows_match_selection():
    storage = {"s1": (10, 20), "s2": (20, 30), "<mv>": (10, 12)}
    flows = [
        Dataflow(Export.index("u1"), ["s1"]),
        Dataflow(Export.index("u2"), ["s2"]),
        Dataflow(Export.materialized_view("<mv>"), compute_inputs=["u1"]),
    ]
    r = select_as_ofs(flows, storage, current_time=15)
    html = as_of_html(r)
    assert "&lt;mv&gt;" in html and "<mv>" not in html
    t = Tables(html)
    rows = {row[0]: row for row in t.tables["colmz-as-ofs"][1:]}
    assert {k: v[1] for k, v in rows.items()} == {k: str(v) for k, v in r.as_ofs.items()}
    origins = r.origins()
    for cid, row in rows.items():
        o = origins[cid]
        assert row[2] == f"[{o.lower}, {o.upper}]" and row[3] == o.step
        assert row[4].startswith(o.reason)
    assert rows["u2"][4] == ("storage input 's2' read frontier 20; soft failure: "
                             "index current time 15")
    fails = t.tables["colmz-failures"]
    assert fails[1:] == [[f.collection, "soft", "upper", "15", f.step, f.reason]
                         for f in r.failures]
    caption = "".join(t.text)
    assert re.search(r"3 exports, 0 pruned, 1 failed constraints \(0 hard\), current time 15",
                     caption)


def test_as_of_repr_html_is_wired():
    r = select_as_ofs([Dataflow(Export.index("i"), ["s"])], {"s": (3, 9)}, 5)
    assert r._repr_html_() == as_of_html(r)
    assert "colmz-failures" not in Tables(r._repr_html_()).tables
