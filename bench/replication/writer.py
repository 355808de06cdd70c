"""The application side of bench.replication: a process that makes small durable commits on a schedule and
records when each was acknowledged. Run by cli.py as ``python -m bench.replication.writer`` (never by hand).

Engines (the same row each: an id, a time in milliseconds and ``--payload`` bytes of text, one row per commit):

  motedb   motedb.open(path) (sync=True: one fdatasync per commit), ``box.put(Row(...))`` outside any write
           block: one durable commit; its commit id is ``store.commit`` right after the put (the number in
           the replicator's object keys)
  sqlite   sqlite3 in autocommit, ``PRAGMA journal_mode=WAL``, ``synchronous`` as given (FULL: the WAL synced
           at each commit, durable before the INSERT returns), ``busy_timeout=5000`` (Litestream's advice);
           one ``INSERT`` per commit; its commit id is the row's id, ``ROW_BASE + n`` (n = 1, 2, ... per
           database), which cli.py finds again in the pages of Litestream's LTX files

Schedule: commit i of store j (of K) at ``start + (i + j / K) / rate``, so the K stores' commits are spread
evenly over each 1/rate seconds (start: ``--start-at``, or when the stores are open and the rows made if that
is later); a writer that falls behind commits at once until it has caught up (how late it ran is recorded).
The result is JSON on stdout: ``{"commits": [[store, commit_id, ack_time], ...], "start", "wall_s",
"late_commits", "late_p50_ms", "late_max_ms"}``.
"""

import argparse
import json
import random
import sqlite3
import sys
import time

ROW_BASE = 1_000_000  # SQLite ids of the measured rows start above this: Litestream's own tables have small ones

WORDS = None


def words(seed=7):
    """A fixed vocabulary of 2,000 pseudo-words (2-9 letters), for text that compresses as prose does."""
    global WORDS
    if WORDS is None:
        rng = random.Random(seed)
        WORDS = ["".join(rng.choice("etaoinshrdlucmfwypvbgkjqxz"[:rng.randint(10, 26)])
                         for _ in range(rng.randint(2, 9))) for _ in range(2000)]
    return WORDS


def text(rng, n):
    """n bytes of words drawn from the vocabulary (each call different)."""
    vocab = words()
    out = ""
    while len(out) < n:
        out += " ".join(rng.choices(vocab, k=n // 5 + 2)) + " "
    return out[:n]


def motedb_row_class():
    import motedb

    class Row(motedb.Entity):
        id: int = 0
        at: int = 0
        text: str = ""

    return Row


class MoteWriter:
    def __init__(self, paths):
        import motedb

        self.Row = motedb_row_class()
        self.stores = [motedb.open(p) for p in paths]
        self.boxes = [s.box(self.Row) for s in self.stores]

    def commit(self, j, payload):
        self.boxes[j].put(self.Row(at=int(time.time() * 1000), text=payload))
        return self.stores[j].commit

    def close(self):
        for s in self.stores:
            s.close()


def sqlite_connect(path, synchronous):
    con = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    con.execute("PRAGMA busy_timeout=5000")
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"PRAGMA synchronous={synchronous}")
    return con


SQLITE_SCHEMA = "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, at INTEGER NOT NULL, text TEXT NOT NULL)"


class SqliteWriter:
    def __init__(self, paths, synchronous):
        self.cons = [sqlite_connect(p, synchronous) for p in paths]
        self.next = []
        for con in self.cons:
            con.execute(SQLITE_SCHEMA)
            top = con.execute("SELECT max(id) FROM t").fetchone()[0] or 0
            self.next.append(max(top, ROW_BASE) + 1)

    def commit(self, j, payload):
        rid = self.next[j]
        self.cons[j].execute("INSERT INTO t(id, at, text) VALUES (?, ?, ?)", (rid, int(time.time() * 1000), payload))
        self.next[j] = rid + 1
        return rid

    def close(self):
        for con in self.cons:
            con.close()


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.replication.writer")
    ap.add_argument("engine", choices=["motedb", "sqlite"])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--rate", type=float, required=True, help="commits per second per store")
    ap.add_argument("--duration", type=float, required=True, help="seconds")
    ap.add_argument("--payload", type=int, default=100, help="bytes of text per row")
    ap.add_argument("--synchronous", default="FULL", help="SQLite's synchronous")
    ap.add_argument("--start-at", type=float, default=0.0, help="time.time() to start at (default: now)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    rng = random.Random(a.seed)
    w = MoteWriter(a.paths) if a.engine == "motedb" else SqliteWriter(a.paths, a.synchronous)
    k = len(a.paths)
    per_store = int(round(a.rate * a.duration))
    sched = sorted(((i + j / k) / a.rate, j) for j in range(k) for i in range(per_store))
    payloads = [text(rng, a.payload) for _ in range(len(sched))]  # a different row each commit
    start = max(a.start_at, time.time())
    while time.time() < start:
        time.sleep(min(0.05, start - time.time()))
    commits, late = [], []
    for n, (off, j) in enumerate(sched):
        due = start + off
        now = time.time()
        if now < due:
            time.sleep(due - now)
        else:
            late.append(now - due)
        cid = w.commit(j, payloads[n])
        commits.append((j, cid, time.time()))
    wall = time.time() - start
    w.close()
    late.sort()
    json.dump({"commits": commits, "start": start, "wall_s": wall, "late_commits": len(late),
               "late_p50_ms": 1e3 * late[len(late) // 2] if late else 0.0,
               "late_max_ms": 1e3 * late[-1] if late else 0.0}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
