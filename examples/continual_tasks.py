"""Continual tasks over a generated event stream: idempotency-key dedup and retention.

Run: ``python examples/continual_tasks.py`` (needs the ``sql`` extra: ``pip install 'colmz[sql]'``).

A payment service emits events ``(idem_key, account, amount, ts)``; clients retry, so one
idempotency key can arrive several times, in one batch or in later ones. Two continual tasks
watch the stream:

* ``payments`` keeps the first event of every key -- a deduplicated ledger. It reads its own
  output (as of the previous time) to drop keys already seen, and groups each batch by key.
* ``recent`` keeps the events of the last 10 ticks (``FROM RETAIN ... WHILE``), evaluated
  whenever new events arrive.

The script prints both at three times, and a materialized view over the ledger for contrast.
"""

from __future__ import annotations

import numpy as np

import colmz


def event_batches(n_times: int = 30, per_time: int = 4, seed: int = 7):
    """Deterministic batches of events; about one in four is a retry of an earlier key."""
    rng = np.random.default_rng(seed)
    sent: list[tuple[str, int, int]] = []
    for t in range(1, n_times + 1):
        rows = []
        for _ in range(per_time):
            if sent and rng.random() < 0.25:
                key, account, amount = sent[rng.integers(len(sent))]  # a client retry
            else:
                key = f"k{len(sent):03d}"
                account, amount = int(rng.integers(1, 4)), int(rng.integers(1, 100))
                sent.append((key, account, amount))
            rows.append((key, account, amount, t))
        yield t, rows


def main() -> dict[int, dict[str, object]]:
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE events (idem_key TEXT, account INT, amount BIGINT, ts UBIGINT)")
    cat.execute("""
        CREATE CONTINUAL TASK payments (idem_key TEXT, account INT, amount BIGINT)
        ON INPUT events AS (
            INSERT INTO payments
            SELECT idem_key, min(account), min(amount) FROM events
            WHERE idem_key NOT IN (SELECT idem_key FROM payments)
            GROUP BY idem_key
        )""")
    cat.execute("CREATE CONTINUAL TASK recent FROM RETAIN events WHILE (ts + 10 > mz_now())")
    cat.execute("""CREATE MATERIALIZED VIEW balances AS
                   SELECT account, sum(amount)::BIGINT AS total FROM payments GROUP BY account""")

    shown = {}
    for t, rows in event_batches():
        values = ", ".join(f"('{k}', {a}, {m}, {ts})" for k, a, m, ts in rows)
        cat.execute(f"INSERT INTO events VALUES {values}", time=t)
        if t in (10, 20, 30):
            shown[t] = {
                "events": cat.sql("SELECT count(*) AS n, count(DISTINCT idem_key) AS keys FROM events").to_pylist()[0],
                "payments": cat.sql("SELECT count(*) AS n FROM payments").to_pylist()[0]["n"],
                "recent": cat.sql("SELECT min(ts) AS oldest, max(ts) AS newest, count(*) AS n FROM recent").to_pylist()[0],
                "balances": cat.sql("SELECT * FROM balances ORDER BY account").to_pylist(),
            }
    # The ledger never holds a key twice, and equals "first event per key" over the whole log.
    dupes = cat.sql("SELECT idem_key FROM payments GROUP BY idem_key HAVING count(*) > 1")
    assert dupes.num_rows == 0
    assert cat.sql("SELECT count(*) AS n FROM payments").to_pylist()[0]["n"] == \
        cat.sql("SELECT count(DISTINCT idem_key) AS n FROM events").to_pylist()[0]["n"]
    return shown


if __name__ == "__main__":
    for t, view in main().items():
        print(f"time {t}:")
        print(f"  events:   {view['events']['n']} rows, {view['events']['keys']} distinct keys")
        print(f"  payments: {view['payments']} rows (one per key)")
        r = view["recent"]
        print(f"  recent:   {r['n']} events with ts in [{r['oldest']}, {r['newest']}]")
        print("  balances: " + ", ".join(f"account {b['account']}: {b['total']}" for b in view["balances"]))
