"""motedb.replicate against a real S3 API server on loopback (moto's server mode, from
tests/python/requirements-integrations.txt): a store shipped and restored equals the
store at the commit restored; an idle store costs no request; a replicator that restarts
goes on from the bucket; a server that fails is retried. The data is synthetic."""

import io
import json
import os
import subprocess
import sys
import threading
import time
from typing import Annotated

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import motedb
from motedb import replicate

boto3 = pytest.importorskip("boto3")
moto_server = pytest.importorskip("moto.server")
zstandard = pytest.importorskip("zstandard")


class Memo(motedb.Entity):
    id: int = 0
    text: Annotated[str, motedb.FullText] = ""
    level: Annotated[int, motedb.Index] = 0


def rows(store):
    if not isinstance(store, motedb.Store):
        with motedb.open(store, readonly=True) as s:
            return rows(s)
    box = store.box(Memo)
    return ([(m.id, m.text, m.level) for m in box.all()],
            sorted(m.id for m in box.query(Memo.text.matches("alpha")).find()))


def restored(url, name, path, client, **kw):
    """Restore store `name` into `path` (kw: txnid or at_time): the commit restored and
    the copy's rows."""
    at = replicate.restore(url, name, path, client=client, **kw)
    return at, rows(str(path))


@pytest.fixture(scope="module")
def server():
    s = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    s.start()
    host, port = s.get_host_and_port()
    yield f"http://{host}:{port}"
    s.stop()


class Counting:
    """A boto3 S3 client that counts the requests it sends."""

    def __init__(self, endpoint):
        self.c = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                              aws_access_key_id="test", aws_secret_access_key="test")
        self.requests = 0
        self.fail = False
        self.lock = threading.Lock()  # (a replicator sends from several threads)
        self.c.meta.events.register("before-send.s3", self._count)

    def _count(self, **kw):
        with self.lock:
            self.requests += 1
        if self.fail:
            raise ConnectionError("the server is down (test)")

    def __getattr__(self, name):
        return getattr(self.c, name)


@pytest.fixture
def s3(server, request):
    c = Counting(server)
    bucket = "motedb-" + request.node.name.replace("_", "-")[:40].lower().strip("-")
    c.create_bucket(Bucket=bucket)
    return c, f"s3://{bucket}/agents"


def test_shipped_and_restored(tmp_path, s3):
    c, url = s3
    src = str(tmp_path / "a.mote")
    rep = replicate.Replicator(url, client=c)
    with motedb.open(src) as s:
        rep.add(s)  # a replicator in the app's process: the app's own handle
        box = s.box(Memo)
        box.put_many([Memo(text=f"alpha {i}", level=i % 5) for i in range(200)])
        assert rep.ship() == 1, rep.errors  # the base
        at = {s.commit: rows(s)}
        for k in range(5):
            with s.write():
                for m in box.query(Memo.level == k).find():
                    m.text = f"beta {m.id} {k}"
                    box.put(m)
                box.put(Memo(text="alpha new", level=k))
            assert rep.ship() == 1  # one delta per pass that saw commits
            at[s.commit] = rows(s)
    assert not rep.errors
    pts = replicate.points(url, "a.mote", client=c)
    assert [p["to"] for p in pts] == sorted(at) and pts[0]["since"] == 0
    for txn, want in at.items():  # each shipped commit, restored
        assert restored(url, "a.mote", tmp_path / f"r{txn}.mote", c, txnid=txn) == (txn, want)
    newest, got = restored(url, "a.mote", tmp_path / "newest.mote", c)
    assert newest == max(at) and got == at[newest]
    with pytest.raises(motedb.ExistsError):
        replicate.restore(url, "a.mote", tmp_path / "newest.mote", client=c)
    with pytest.raises(motedb.NotFoundError):
        replicate.restore(url, "nothing.mote", tmp_path / "x.mote", client=c)


def test_idle_store_costs_no_request(tmp_path, s3):
    c, url = s3
    src = str(tmp_path / "idle.mote")
    with motedb.open(src) as s:
        s.box(Memo).put(Memo(text="alpha"))
    rep = replicate.Replicator(url, client=c)
    rep.add(src)
    assert rep.ship() == 1
    before = c.requests
    for _ in range(5):
        assert rep.ship() == 0
    assert c.requests == before  # no LIST, no PUT, no HEAD


def test_restart_goes_on_from_the_bucket(tmp_path, s3):
    c, url = s3
    src = str(tmp_path / "b.mote")
    with motedb.open(src) as s:
        box = s.box(Memo)
        box.put_many([Memo(text=f"alpha {i}") for i in range(50)])
        first = replicate.Replicator(url, client=c)
        first.add(s)
        first.ship()
        box.put(Memo(text="more"))
        first.ship()
        del first  # as if killed: the next one knows only the bucket
        box.put(Memo(text="after the restart"))
        again = replicate.Replicator(url, client=c)
        again.add(s)
        assert again.ship() == 1
        want = rows(s)
    pts = replicate.points(url, "b.mote", client=c)
    assert len(pts) == 3 and sum(p["since"] == 0 for p in pts) == 1  # no second base
    assert restored(url, "b.mote", tmp_path / "r.mote", c)[1] == want


def test_server_down_then_back(tmp_path, s3):
    c, url = s3
    src = str(tmp_path / "d.mote")
    rep = replicate.Replicator(url, client=c)
    with motedb.open(src) as s:
        rep.add(s)
        box = s.box(Memo)
        box.put(Memo(text="alpha one"))
        rep.ship()
        c.fail = True
        box.put(Memo(text="alpha two"))
        assert rep.ship() == 0 and rep.errors
        box.put(Memo(text="alpha three"))
        c.fail = False
        assert rep.ship() == 1  # both commits in one delta, from the last one shipped
        want = rows(s)
    assert restored(url, "d.mote", tmp_path / "r.mote", c)[1] == want


def test_new_generation_after_many_deltas(tmp_path, s3):
    c, url = s3
    src = str(tmp_path / "g.mote")
    rep = replicate.Replicator(url, client=c, full_every=3, packs=False)
    with motedb.open(src) as s:
        rep.add(s)
        box = s.box(Memo)
        for i in range(8):
            box.put(Memo(text=f"alpha {i}", level=i))
            rep.ship()
        want = rows(s)
    pts = replicate.points(url, "g.mote", client=c)
    assert len({p["generation"] for p in pts}) == 2  # bases at 1 and 5
    assert restored(url, "g.mote", tmp_path / "r.mote", c)[1] == want


def test_writer_in_another_process_and_run_loop(tmp_path, s3):
    """The replicator as its own thread beside an app process that commits."""
    c, url = s3
    src = str(tmp_path / "w.mote")
    with motedb.open(src) as s:
        s.box(Memo).put(Memo(text="alpha start"))
    rep = replicate.Replicator(url, client=c, interval=0.02)
    rep.add(src)
    stop = threading.Event()
    t = threading.Thread(target=rep.run, args=(stop,))
    t.start()
    code = MEMO + ("import sys\n"
                   "with motedb.open(sys.argv[1]) as s:\n"
                   "    b = s.box(Memo)\n"
                   "    for i in range(200):\n"
                   "        b.put(Memo(text=f'alpha {i}', level=i))\n")
    subprocess.run([sys.executable, "-c", code, src], check=True)
    last = int(subprocess.run(  # (not opened here: the replicator's thread opens it)
        [sys.executable, "-c", "import motedb, sys\n"
         "with motedb.open(sys.argv[1], readonly=True) as s: print(s.commit)", src],
        check=True, capture_output=True, text=True).stdout)
    for _ in range(500):  # until the last commit is shipped
        if rep.stores["w.mote"].get("to") == last:
            break
        threading.Event().wait(0.01)
    stop.set()
    t.join()
    want = rows(src)
    assert not rep.errors and rep.shipped_objects >= 2
    assert restored(url, "w.mote", tmp_path / "r.mote", c) == (last, want)


def test_bad_urls_and_names(tmp_path, s3):
    c, _ = s3
    with pytest.raises(ValueError):
        replicate.Replicator("http://bucket/x", client=c)
    rep = replicate.Replicator("s3://b/x", client=c)
    with pytest.raises(ValueError):
        rep.add(tmp_path / "a.mote", name="a/b")
    assert replicate.parse_url("s3://bucket/a/b/") == ("bucket", "a/b")
    assert replicate.parse_url("s3://bucket") == ("bucket", "")


def test_lost_response_after_an_upload(tmp_path, s3):
    """The server stored the object but the answer was lost: the next pass ships a delta
    from the same commit again, and a restore takes the newer one."""
    c, url = s3
    src = str(tmp_path / "l.mote")
    rep = replicate.Replicator(url, client=c)
    with motedb.open(src) as s:
        rep.add(s)
        box = s.box(Memo)
        box.put(Memo(text="alpha one"))
        rep.ship()
        real = c.c.put_object

        def upload_then_fail(*a, **kw):
            real(*a, **kw)
            raise ConnectionError("the answer was lost (test)")
        c.c.put_object = upload_then_fail
        box.put(Memo(text="alpha two"))
        assert rep.ship() == 0 and rep.errors
        c.c.put_object = real
        box.put(Memo(text="alpha three"))
        assert rep.ship() == 1
        want = rows(s)
    pts = replicate.points(url, "l.mote", client=c)
    assert len(pts) == 3 and pts[1]["since"] == pts[2]["since"]  # two deltas from one commit
    assert restored(url, "l.mote", tmp_path / "r.mote", c)[1] == want


MEMO = """
from typing import Annotated
import motedb
class Memo(motedb.Entity):
    id: int = 0
    text: Annotated[str, motedb.FullText] = ""
    level: Annotated[int, motedb.Index] = 0
"""

WRITER = MEMO + """
import sys, time
with motedb.open(sys.argv[1]) as s:
    b = s.box(Memo)
    start = b.count()
    for i in range(start, int(sys.argv[2])):
        b.put(Memo(text=f"alpha {i}", level=i))  # one commit each: level i is the i-th
        time.sleep(0.002)
"""


def test_kill_9_of_replicator_and_app(tmp_path, s3, server):
    """kill -9 of the replicator (five times, each after it shipped) and of the app (once)
    at random points:
    every shipped point restores to a state the app made (the first k objects, k
    growing), and after a last pass the newest equals the store."""
    import random
    import signal
    import time

    c, url = s3
    N = 1500
    src = str(tmp_path / "k.mote")
    with motedb.open(src) as s:
        s.box(Memo).put(Memo(text="alpha 0", level=0))
    env = dict(os.environ, AWS_ENDPOINT_URL=server, AWS_ACCESS_KEY_ID="test",
               AWS_SECRET_ACCESS_KEY="test", AWS_DEFAULT_REGION="us-east-1")
    rng = random.Random(5)

    def replicator():
        return subprocess.Popen([sys.executable, "-m", "motedb.replicate", "replicate", src, url,
                                 "--interval", "0.005"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def app(n):
        return subprocess.Popen([sys.executable, "-c", WRITER, src, str(n)])

    def shipped():
        return len(replicate.points(url, "k.mote", client=c))

    writer, rep = app(N), replicator()
    for k in range(6):
        before = shipped()  # (each replicator ships before it is killed: it starts slowly)
        for _ in range(500):
            if shipped() > before:
                break
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.1))
        if k == 2:  # the app, mid-commit or between two
            writer.send_signal(signal.SIGKILL)
            writer.wait()
            writer = app(N)
        else:
            rep.send_signal(signal.SIGKILL)
            rep.wait()
            rep = replicator()
    assert writer.wait(120) == 0
    time.sleep(0.2)
    rep.send_signal(signal.SIGKILL)
    rep.wait()
    subprocess.run([sys.executable, "-m", "motedb.replicate", "replicate", src, url, "--once"],
                   env=env, check=True, capture_output=True)
    pts = replicate.points(url, "k.mote", client=c)
    assert len(pts) > 3
    last = -1
    for p in pts[:: max(1, len(pts) // 12)] + [pts[-1]]:
        out = tmp_path / f"p{p['generation']}-{p['to']}.mote"
        if out.exists():
            continue
        _, (objs, _) = restored(url, "k.mote", out, c, txnid=p["to"])
        levels = [lvl for _, _, lvl in objs]
        assert levels == list(range(len(levels)))  # what the app had made by then
        assert len(levels) >= last or p["generation"] != pts[-1]["generation"]
        last = len(levels)
    assert restored(url, "k.mote", tmp_path / "newest.mote", c)[1] == rows(src)
    assert len(rows(src)[0]) == N


class FaultyServer:
    """An HTTP proxy in front of the S3 server that fails as a server does, at random
    requests: it answers 500 InternalError or 503 SlowDown itself, answers slowly, or
    (an upload cut mid-way) reads half of a PUT's body and drops the connection."""

    def __init__(self, upstream, seed):
        import http.client
        import http.server
        import random
        import socketserver
        import time
        from urllib.parse import urlsplit

        up = urlsplit(upstream)
        rng = random.Random(seed)
        self.hits = {"500": 0, "503": 0, "slow": 0, "cut": 0}
        self.failing = True
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _error(self, status, code):
                body = (f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code>"
                        f"<Message>test</Message></Error>").encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                r = rng.random() if owner.failing else 1.0
                if r < 0.1 and self.command == "PUT" and n > 1:
                    owner.hits["cut"] += 1
                    self.rfile.read(n // 2)
                    self.close_connection = True
                    self.connection.shutdown(2)  # no answer: the upload cut mid-way
                    return
                body = self.rfile.read(n) if n else b""
                if r < 0.2:
                    owner.hits["500"] += 1
                    return self._error(500, "InternalError")
                if r < 0.3:
                    owner.hits["503"] += 1
                    return self._error(503, "SlowDown")
                if r < 0.4:
                    owner.hits["slow"] += 1
                    time.sleep(0.05)
                c = http.client.HTTPConnection(up.hostname, up.port, timeout=30)
                c.request(self.command, self.path, body=body, headers=dict(self.headers))
                a = c.getresponse()
                data = a.read()
                self.send_response(a.status)
                for k, v in a.getheaders():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                c.close()

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _any

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_server_errors_throttling_slow_answers_and_cut_uploads(tmp_path, s3, server):
    """The server fails at random requests (HTTP 500s, 503 SlowDown, slow answers,
    uploads cut mid-way), through a proxy in front of it, with the client's own retries
    on (boto3's standard mode, two attempts): failed passes are retried from the last
    commit shipped, every object in the bucket is whole (each shipped point restores),
    and the newest shipped state restores to the store."""
    from botocore.config import Config

    _, url = s3
    proxy = FaultyServer(server, seed=11)
    c = boto3.client("s3", endpoint_url=proxy.url, region_name="us-east-1",
                     aws_access_key_id="test", aws_secret_access_key="test",
                     config=Config(retries={"max_attempts": 2, "mode": "standard"},
                                   connect_timeout=5, read_timeout=5))
    direct = s3[0]
    src = str(tmp_path / "f.mote")
    rep = replicate.Replicator(url, client=c)
    at = {}
    try:
        with motedb.open(src) as s:
            rep.add(s)
            box = s.box(Memo)
            for i in range(30):
                box.put(Memo(text=f"alpha {i}" * (1 + i % 40), level=i))
                at[s.commit] = rows(s)
                rep.ship()
            proxy.failing = False
            while rep.ship():  # the server well again: one pass brings it level
                pass
            assert rep.stores["f.mote"]["to"] == s.commit
            want = rows(s)
    finally:
        proxy.close()
    assert rep.errors and min(proxy.hits.values()) > 0, proxy.hits
    pts = replicate.points(url, "f.mote", client=direct)
    for to in sorted({p["to"] for p in pts})[::4]:  # whole objects: each restores
        path = tmp_path / f"r{to}.mote"
        assert restored(url, "f.mote", path, direct, txnid=to) == (to, at[to])
    assert restored(url, "f.mote", tmp_path / "r.mote", direct)[1] == want


def test_restore_by_time(tmp_path, s3):
    import datetime
    import time

    c, url = s3
    src = str(tmp_path / "t.mote")
    rep = replicate.Replicator(url, client=c)
    with motedb.open(src) as s:
        rep.add(s)
        box = s.box(Memo)
        box.put(Memo(text="alpha first"))
        rep.ship()
        first = rows(s)
        time.sleep(1.1)  # (S3 keeps LastModified to the second)
        between = datetime.datetime.now(datetime.timezone.utc)
        time.sleep(1.1)
        box.put(Memo(text="alpha second"))
        rep.ship()
        second = rows(s)
    assert restored(url, "t.mote", tmp_path / "a.mote", c, at_time=between)[1] == first
    now = datetime.datetime.now(datetime.timezone.utc)
    assert restored(url, "t.mote", tmp_path / "b.mote", c, at_time=now)[1] == second
    with pytest.raises(motedb.NotFoundError):
        replicate.restore(url, "t.mote", tmp_path / "c.mote", client=c,
                          at_time=between - datetime.timedelta(days=1))
    with pytest.raises(ValueError):
        replicate.restore(url, "t.mote", tmp_path / "d.mote", client=c,
                          at_time=datetime.datetime(2026, 1, 1))


def test_mote_tool_runs_replicate_and_restore(tmp_path, s3, server):
    """`mote replicate`, `mote restore` and `mote prune` (the C tool hands them to this
    module)."""
    tool = os.path.join(os.path.dirname(__file__), "..", "..", "build", "mote")
    if not os.path.exists(tool):
        pytest.skip("no build/mote (make build makes it)")
    c, url = s3
    src = str(tmp_path / "cli.mote")
    with motedb.open(src) as s:
        s.box(Memo).put_many([Memo(text=f"alpha {i}") for i in range(30)])
        want = rows(s)
    env = dict(os.environ, MOTE_PYTHON=sys.executable, AWS_ENDPOINT_URL=server,
               AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test",
               AWS_DEFAULT_REGION="us-east-1")
    out = subprocess.run([tool, "replicate", src, url, "--once"], env=env, check=True,
                         capture_output=True, text=True).stdout
    assert "1 object(s) shipped" in out
    out = subprocess.run([tool, "restore", f"{url}/cli.mote", str(tmp_path / "r.mote")],
                         env=env, check=True, capture_output=True, text=True).stdout
    assert "as of commit" in out and rows(str(tmp_path / "r.mote")) == want
    bad = subprocess.run([tool, "restore", f"{url}/none.mote", str(tmp_path / "n.mote")],
                         env=env, capture_output=True, text=True)
    assert bad.returncode == 1 and "no copy of store" in bad.stderr
    out = subprocess.run([tool, "prune", url, "--retention", "3600"], env=env, check=True,
                         capture_output=True, text=True).stdout
    assert out.startswith("0 object(s) of older generations and 0 pack(s) deleted"), out
    bad = subprocess.run([tool, "prune", url, "--retention", "-1"], env=env,
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "retention >= 0" in bad.stderr


def settle(path):
    """Date the file's last write back a minute, as if the store had been idle since."""
    t = os.stat(path).st_mtime - 60
    os.utime(path, (t, t))


def test_a_directory_of_stores_that_come_and_go(tmp_path, s3):
    """watch(): stores appear and are shipped, idle ones cost neither a request nor an
    open once settled, a deleted one is forgotten (what was shipped stays restorable),
    one made again under the same name starts a new generation."""
    c, url = s3
    agents = tmp_path / "agents"
    agents.mkdir()
    for i in range(40):
        with motedb.open(agents / f"a{i}.mote") as s:
            s.box(Memo).put_many([Memo(text=f"alpha {i} {k}", level=k) for k in range(i % 7)])
    (agents / "notes.txt").write_text("not a store")
    motedb.open(agents / "new.mote").close()  # created, never committed: nothing to ship
    rep = replicate.Replicator(url, client=c, workers=3)
    rep.watch(agents)
    assert rep.ship() == 40, rep.errors  # new.mote has no commit yet: nothing
    assert not rep.errors and len(rep.stores) == 41
    for p in agents.glob("*.mote"):
        settle(p)
    rep.ship()  # sees them idle and settled
    opened, requests = rep.opened, c.requests
    for _ in range(3):
        assert rep.ship() == 0
    assert (rep.opened, c.requests) == (opened, requests)  # a stat each, nothing more
    want3 = rows(str(agents / "a3.mote"))
    with motedb.open(agents / "a5.mote") as s:
        s.box(Memo).put(Memo(text="alpha late", level=9))
        want5 = rows(s)
    os.unlink(agents / "a3.mote")
    assert rep.ship() == 1 and "a3.mote" not in rep.stores and len(rep.stores) == 40
    assert restored(url, "a5.mote", tmp_path / "r5.mote", c)[1] == want5
    assert restored(url, "a3.mote", tmp_path / "r3.mote", c)[1] == want3  # still there
    os.unlink(agents / "a4.mote")
    rep.ship()
    with motedb.open(agents / "a4.mote") as s:  # a new agent under an old name
        s.box(Memo).put_many([Memo(text=f"gamma {k}") for k in range(30)])
        want4 = rows(s)
    assert rep.ship() == 1
    gens = {p["generation"] for p in replicate.points(url, "a4.mote", client=c)}
    assert len(gens) == 2
    assert restored(url, "a4.mote", tmp_path / "r4.mote", c)[1] == want4


def test_a_store_file_replaced_starts_a_new_generation(tmp_path, s3):
    """A store replaced by another file (as a compaction's copy renamed over it): a new
    inode, so a new base, even when its commits did not go back."""
    c, url = s3
    src = tmp_path / "c.mote"
    with motedb.open(src) as s:
        s.box(Memo).put_many([Memo(text=f"alpha {k}") for k in range(20)])
    rep = replicate.Replicator(url, client=c)
    rep.add(src)
    assert rep.ship() == 1
    other = tmp_path / "other.mote"
    with motedb.open(other) as s:
        box = s.box(Memo)
        for k in range(40):  # more commits than the first store has
            box.put(Memo(text=f"delta {k}"))
        want = rows(s)
    os.replace(other, src)
    assert rep.ship() == 1
    pts = replicate.points(url, "c.mote", client=c)
    assert [p["since"] for p in pts] == [0, 0] and len({p["generation"] for p in pts}) == 2
    assert restored(url, "c.mote", tmp_path / "r.mote", c)[1] == want


def test_request_rate_is_bounded(tmp_path, s3):
    """rate=N: at most N requests a second (and a second's worth at once); the stores
    left over are served first at the next pass, so every one gets shipped."""
    import time
    c, url = s3
    for i in range(12):
        with motedb.open(tmp_path / f"r{i}.mote") as s:
            s.box(Memo).put(Memo(text=f"alpha {i}"))
    rep = replicate.Replicator(url, client=c, rate=8, workers=2)
    rep.watch(tmp_path)
    start, before, shipped = time.monotonic(), c.requests, 0
    first = rep.ship()
    assert 0 < first < 12  # each new store costs a LIST and a PUT: 24 requests
    shipped += first
    while shipped < 12:
        shipped += rep.ship()
        assert c.requests - before <= 8 + 8 * (time.monotonic() - start) + 1
        time.sleep(0.2)
    assert not rep.errors
    assert len({p["to"] for i in range(12)
                for p in replicate.points(url, f"r{i}.mote", client=c)}) >= 1


def test_compressed_and_plain_objects_restore_alike(tmp_path, s3):
    """Objects as they are, by zlib (an earlier replicator's, or one without zstandard),
    by zstd (the default) and by zlib against the delta before (small deltas, in packs)
    make one chain: a restore to each of them gives the store at that commit."""
    c, url = s3
    src = str(tmp_path / "z.mote")
    want = {}
    with motedb.open(src) as s:
        box = s.box(Memo)
        box.put_many([Memo(text=f"alpha {k} " * 20, level=k) for k in range(300)])
        for i, compress in enumerate((False, "zlib", True)):
            if i:
                box.put(Memo(text=f"alpha again {i}"))
            rep = replicate.Replicator(url, client=c, compress=compress)
            rep.add(s)  # (new: no delta before to compress against)
            assert rep.ship() == 1
            want[s.commit] = rows(s)
        for k in range(3):
            box.put(Memo(text=f"alpha {k} and more", level=k))
            assert rep.ship() == 1
        want[s.commit] = rows(s)
        pts = replicate.points(url, "z.mote", client=c)
        s.delta(tmp_path / "plain.delta", since=pts[0]["to"])
        s.delta(tmp_path / "last.delta", since=pts[-2]["to"])
    assert [p["comp"] for p in pts] == ["", "z", "zst", "zd", "zd", "zd"]
    assert [p.get("packed", False) for p in pts] == [False, False, False, True, True, True]
    for p in pts[1:3]:
        assert p["size"] * 3 < os.path.getsize(tmp_path / "plain.delta")  # pages half empty
    # against the delta before it, a small commit's delta is a few hundred bytes
    assert pts[-1]["size"] * 10 < os.path.getsize(tmp_path / "last.delta")
    assert pts[-1]["size"] * 3 < pts[2]["size"]
    for i, at in enumerate(sorted(want)):
        assert restored(url, "z.mote", tmp_path / f"r{i}.mote", c, txnid=at) == (at, want[at])


def test_restore_goes_on_when_the_base_download_drops(tmp_path, s3):
    """The base goes into the copy as it downloads (no delta file); when the connection
    drops mid-way, the copy begun is removed and the base downloaded whole instead."""
    c, url = s3
    with motedb.open(tmp_path / "b.mote") as s:
        box = s.box(Memo)
        box.put_many([Memo(text=f"alpha {i} " * 30, level=i) for i in range(3000)])
        rep = replicate.Replicator(url, client=c)
        rep.add(s)
        assert rep.ship() == 1
        box.put(Memo(text="alpha two"))
        assert rep.ship() == 1
        want = rows(s)
    real, dropped = c.c.get_object, []

    class Dropping:
        def __init__(self, body):
            self.body, self.n = body, 0

        def read(self, n=-1):
            if self.n > 5000:
                dropped.append(self.n)
                raise ConnectionResetError("the connection dropped (test)")
            b = self.body.read(n)
            self.n += len(b)
            return b

    def get_object(**kw):
        r = real(**kw)
        if ".00000000000000000000.delta" in kw["Key"] and not dropped:
            r["Body"] = Dropping(r["Body"])
        return r
    c.get_object = get_object
    assert restored(url, "b.mote", tmp_path / "r.mote", c)[1] == want
    assert dropped and not os.path.exists(tmp_path / "r.mote.restoring")


def test_a_large_delta_after_a_small_one(tmp_path, s3, monkeypatch):
    """A delta too large to hold in memory (here over 64 KB) that follows a small object
    of the store's own goes through a file, compressed against the small one's end as
    a small one is (its frames each against it), and restores."""
    monkeypatch.setattr(replicate, "_IN_MEMORY", 64 << 10)
    c, url = s3
    with motedb.open(tmp_path / "l.mote") as s:
        box = s.box(Memo)
        box.put_many([Memo(text=f"alpha {i}", level=i) for i in range(50)])
        rep = replicate.Replicator(url, client=c, packs=False)
        rep.add(s)
        assert rep.ship() == 1
        box.put(Memo(text="alpha one more"))
        assert rep.ship() == 1  # (small: its end is the next one's dictionary)
        small = rows(s)
        box.put_many([Memo(text=f"alpha {i} " + "words " * (i % 50), level=i)
                      for i in range(3000)])
        assert rep.ship() == 1
        want = rows(s)
    pts = replicate.points(url, "l.mote", client=c)
    assert [p["comp"] for p in pts] == ["zst", "zd", "zd"] and pts[2]["size"] > 64 << 10
    assert restored(url, "l.mote", tmp_path / "r.mote", c)[1] == want
    assert restored(url, "l.mote", tmp_path / "r1.mote", c, txnid=pts[1]["to"])[1] == small


def test_zstd_missing(tmp_path, s3, monkeypatch):
    """Without zstandard a Replicator compresses by zlib (or refuses compress="zstd"),
    and a restore that needs it says how to get it before it downloads a byte."""
    c, url = s3
    with motedb.open(tmp_path / "m.mote") as s:
        s.box(Memo).put(Memo(text="alpha"))
        rep = replicate.Replicator(url, client=c)
        rep.add(s)
        assert rep.codec == "zst" and rep.ship() == 1

        def missing():
            raise ImportError("motedb.replicate needs zstandard (test)")
        monkeypatch.setattr(replicate, "_zstd", missing)
        assert replicate.Replicator(url, client=c).codec == "z"
        with pytest.raises(ImportError):
            replicate.Replicator(url, client=c, compress="zstd")
        with pytest.raises(ValueError):
            replicate.Replicator(url, client=c, compress="lz4")
    gets = []
    c.c.meta.events.register("before-send.s3.GetObject", lambda **kw: gets.append(kw))
    with pytest.raises(ImportError, match="zstandard"):
        replicate.restore(url, "m.mote", tmp_path / "r.mote", client=c)
    assert not gets and not os.path.exists(tmp_path / "r.mote")


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_damaged_compressed_object_is_refused_as_damaged(data):
    """A compressed object inflates to what was compressed, or raises CorruptError,
    whatever was done to its bytes (flipped, cut short, grown, a frame that says it
    holds more than a frame can): never another error, never an allocation of what a
    damaged header says. (A cut at a frame's end inflates to the frames before it: the
    delta's own trailer refuses that when it is applied.)"""
    codec = data.draw(st.sampled_from(["zst", "z"]))
    raw = data.draw(st.binary(min_size=1, max_size=3000)) * data.draw(st.integers(1, 40))
    frame, replicate._FRAME = replicate._FRAME, 4096  # (several frames, small)
    try:
        damaged(data, codec, raw)
    finally:
        replicate._FRAME = frame


def damaged(data, codec, raw):
    good = replicate._pack(raw, codec)
    kind = data.draw(st.sampled_from(["flip", "cut", "grow", "huge", "none"]))
    obj = bytearray(good)
    if kind == "flip":
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(obj) - 1))
            obj[i] ^= 1 << data.draw(st.integers(0, 7))
    elif kind == "cut":
        del obj[data.draw(st.integers(0, len(obj) - 1)):]
    elif kind == "grow":
        i = data.draw(st.integers(0, len(obj)))
        obj[i:i] = data.draw(st.binary(min_size=1, max_size=40))
    elif kind == "huge" and codec == "zst":  # a frame that says it holds more than 4 MB
        z = zstandard.ZstdCompressor().compress(bytes(replicate._FRAME + 1))
        obj[:0] = len(z).to_bytes(4, "little") + z
    try:
        got = b"".join(replicate._inflated(io.BytesIO(bytes(obj)).read, "o", codec=codec))
    except motedb.CorruptError:
        assert kind != "none" and not (kind == "huge" and codec == "z")
        return
    if kind == "cut":  # (at a frame's end: the frames before it)
        assert raw.startswith(got)
    else:
        assert got == raw


def test_run_passes_ship_a_store_once_per_interval(tmp_path, s3):
    """run()'s passes (ship(due=True)) look at a store only once its last object is
    `interval` old: a busy store costs one object per interval, and a commit to a quiet
    one goes at the next pass."""
    c, url = s3
    src = str(tmp_path / "i.mote")
    rep = replicate.Replicator(url, client=c, interval=30)
    assert rep.poll == 1.0 and replicate.Replicator(url, client=c).poll == 0.1
    with motedb.open(src) as s:
        rep.add(s)
        box = s.box(Memo)
        box.put(Memo(text="alpha"))
        assert rep.ship(due=True) == 1  # never shipped: due
        box.put(Memo(text="alpha two"))
        before = c.requests
        assert rep.ship(due=True) == 0 and c.requests == before  # shipped just now
        rep.stores["i.mote"]["shipped_at"] -= 30  # as if the interval went by
        assert rep.ship(due=True) == 1
        assert rep.ship() == 0  # (a plain pass ships what changed: nothing)
        box.put(Memo(text="alpha three"))
        assert rep.ship() == 1  # a plain pass does not wait
        want = rows(s)
    assert restored(url, "i.mote", tmp_path / "r.mote", c)[1] == want


def test_parse_key():
    k = "agents/a.mote/1796566293134-00ff00ff00ff00ff/00000000000000000007.00000000000000000003.delta.z"
    assert replicate.parse_key(k) == {"name": "a.mote", "generation": 1796566293134,
                                      "ident": 0x00ff00ff00ff00ff, "to": 7, "since": 3,
                                      "comp": "z"}
    assert replicate.parse_key(k.split("/", 1)[1])["name"] == "a.mote"
    assert replicate.parse_key("x/1796566293134/00000000000000000002.00000000000000000000.delta") \
        == {"name": "x", "generation": 1796566293134, "ident": 0, "to": 2, "since": 0,
            "comp": ""}
    assert replicate.parse_key("agents/a.mote/notes.txt") is None


def test_packs_one_request_per_pass_for_many_stores(tmp_path, s3):
    """Within a minute of a store's object of its own, its deltas go in the pass's pack:
    one PUT for every store that changed. Every store restores from its object and the
    packs after it, at its newest commit and at one in between; after the span a delta
    of its own takes in what went in packs; so does the first one after a restart; a
    pack that fails is shipped again from the same commits."""
    c, url = s3
    names = [f"p{i}.mote" for i in range(12)]
    stores = [motedb.open(tmp_path / n) for n in names]
    try:
        rep = replicate.Replicator(url, client=c)
        for s in stores:
            s.box(Memo).put(Memo(text="alpha base"))
            rep.add(s)
        assert rep.ship() == 12  # the bases: objects of their own
        at = {n: {} for n in names}
        for r in range(3):
            for n, s in zip(names, stores):
                s.box(Memo).put(Memo(text=f"alpha {r}", level=r))
                at[n][s.commit] = rows(s)
            before = c.requests
            assert rep.ship() == 1 and c.requests - before == 1  # one pack, one PUT
        assert rep.packed_deltas == 36
        ranges = []  # a restore reads a pack's index and its store's ranges, not the pack

        def note_range(request, **kw):
            if "/.packs/" in request.url:
                r = request.headers.get("Range")
                ranges.append(r.encode() if isinstance(r, str) else r)
        c.c.meta.events.register("before-send.s3", note_range)
        assert restored(url, "p5.mote", tmp_path / "r5.mote", c)[1] == rows(stores[5])
        c.c.meta.events.unregister("before-send.s3", note_range)
        assert len(ranges) == 3 and all(r and r.startswith(b"bytes=") for r in ranges), ranges
        for n in names[:4]:
            mid = sorted(at[n])[1]
            assert restored(url, n, tmp_path / f"r-{n}", c) == (max(at[n]), at[n][max(at[n])])
            assert restored(url, n, tmp_path / f"m-{n}", c, txnid=mid) == (mid, at[n][mid])
        # the span over for p0: its next delta is an object of its own, from its base
        base0 = rep.stores["p0.mote"]["anchor"]
        rep.stores["p0.mote"]["anchor_time"] -= 3600
        stores[0].box(Memo).put(Memo(text="alpha late"))
        at["p0.mote"][stores[0].commit] = rows(stores[0])
        assert rep.ship() == 1
        own = [p for p in replicate.points(url, "p0.mote", client=c) if not p.get("packed")]
        assert own[-1]["since"] == base0 and own[-1]["to"] == stores[0].commit
        for txn, want in sorted(at["p0.mote"].items()):  # the packed ones too, before it
            assert restored(url, "p0.mote", tmp_path / f"o{txn}.mote", c, txnid=txn) == (txn, want)
        # a pack that fails: nothing settled, the same commits go again
        c.fail = True
        for s in stores[1:3]:
            s.box(Memo).put(Memo(text="alpha while down"))
        assert rep.ship() == 0 and rep.errors
        c.fail = False
        assert rep.ship() == 1
        # a restarted replicator: its first delta of each store is an object of its own
        again = replicate.Replicator(url, client=c)
        for s in stores[1:3]:
            again.add(s)
            s.box(Memo).put(Memo(text="alpha after the restart"))
        assert again.ship() == 2 and again.packed_deltas == 0
        for n, s in zip(names[1:3], stores[1:3]):
            assert restored(url, n, tmp_path / f"a-{n}", c)[1] == rows(s)
    finally:
        for s in stores:
            s.close()


def test_a_new_base_when_the_chain_outweighs_the_store(tmp_path, s3):
    """A store that rewrites its objects gets a new base once its base and deltas weigh
    twice what it takes now and a megabyte more; one that grows (its deltas are its new
    data) does not."""
    c, url = s3
    rep = replicate.Replicator(url, client=c, packs=False)
    with motedb.open(tmp_path / "churn.mote") as churn, motedb.open(tmp_path / "grow.mote") as grow:
        rep.add(churn)
        rep.add(grow)
        cb, gb = churn.box(Memo), grow.box(Memo)
        cb.put_many([Memo(text=os.urandom(500).hex()) for _ in range(100)])  # ~100 KB
        gb.put_many([Memo(text=os.urandom(500).hex()) for _ in range(100)])
        rep.ship()
        for _ in range(30):  # ~50 KB compressed a delta, each
            cb.put_many([Memo(id=i, text=os.urandom(500).hex()) for i in range(1, 101)])
            gb.put_many([Memo(text=os.urandom(500).hex()) for _ in range(100)])
            rep.ship()
        want = rows(churn), rows(grow)
    gens = {n: {p["generation"] for p in replicate.points(url, n, client=c)}
            for n in ("churn.mote", "grow.mote")}
    assert len(gens["churn.mote"]) >= 2 and len(gens["grow.mote"]) == 1, gens
    assert restored(url, "churn.mote", tmp_path / "rc.mote", c)[1] == want[0]
    assert restored(url, "grow.mote", tmp_path / "rg.mote", c)[1] == want[1]


def listing(c, url, under=""):
    """The keys under the replicated prefix (`under`: a folder of it, e.g. ".packs")."""
    bucket, prefix = replicate.parse_url(url)
    top = prefix + "/" + (under + "/" if under else "")
    return sorted(o["Key"] for page in c.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=top) for o in page.get("Contents", []))


def packed_then_own(rep, c, url, s, name):
    """Store s (added to rep as `name`): a base, a delta in a pack, then, its pack span
    made over, a delta of its own that takes the packed one in."""
    s.box(Memo).put(Memo(text="alpha base"))
    rep.ship()
    s.box(Memo).put(Memo(text="alpha packed"))
    assert rep.ship() == 1 and len(listing(c, url, ".packs")) == 1
    rep.stores[name]["anchor_time"] -= 3600
    s.box(Memo).put(Memo(text="alpha own"))
    assert rep.ship() == 1


def test_prune_deletes_packs_taken_in_and_keeps_an_idle_stores_last_commits(tmp_path, s3):
    """A pack older than the retention goes once every delta in it was taken in by an
    object of its store's own uploaded before the cutoff; a pack that holds the newest
    commits of a store idle since stays (they are nowhere else), and so does everything
    younger than the retention. Restores give the newest commits before and after; an
    older commit is restored at the granularity left (the object of its own before it)."""
    c, url = s3
    rep = replicate.Replicator(url, client=c)
    with motedb.open(tmp_path / "a.mote") as a, motedb.open(tmp_path / "b.mote") as b:
        rep.add(a)
        rep.add(b)
        commits = {"a.mote": [], "b.mote": []}
        for s in (a, b):
            s.box(Memo).put(Memo(text="alpha base"))
        assert rep.ship() == 2  # two bases
        base_a = a.commit
        for s in (a, b):  # one pack: a's delta and b's
            s.box(Memo).put(Memo(text="alpha one", level=1))
            commits[os.path.basename(s.path)].append((s.commit, rows(s)))
        assert rep.ship() == 1
        a.box(Memo).put(Memo(text="alpha two", level=2))  # a pack of a's alone
        commits["a.mote"].append((a.commit, rows(a)))
        assert rep.ship() == 1
        assert len(listing(c, url, ".packs")) == 2
        # a retention of an hour: all of it is younger, nothing goes (and nothing is read)
        got = rep.prune()  # (a day by default)
        assert (got["objects"], got["packs"], got["packs_kept"]) == (0, 0, 0)
        before = c.requests
        got = replicate.prune(url, retention=3600, client=c)
        assert got == {"objects": 0, "packs": 0, "packs_kept": 0, "packs_damaged": 0,
                       "requests": 1}
        assert c.requests - before == 1 and len(listing(c, url, ".packs")) == 2
        # a's span is over: its next delta is an object of its own that takes both in
        time.sleep(1.1)  # (LastModified is to the second)
        rep.stores["a.mote"]["anchor_time"] -= 3600
        a.box(Memo).put(Memo(text="alpha three", level=3))
        assert rep.ship() == 1
        want_a, want_b = rows(a), rows(b)
        # a cutoff before that object's upload: a restore to a time between needs the
        # packs, both stay
        own = [p for p in replicate.points(url, "a.mote", client=c) if not p.get("packed")]
        got = replicate.prune(url, retention=0, client=c, now=own[-1]["time"].timestamp() - 0.01)
        assert (got["packs"], got["packs_kept"]) == (0, 2), got
        kept = {}
        got = replicate.prune(url, retention=0, client=c, now=time.time() + 5, kept=kept)
        assert (got["objects"], got["packs"], got["packs_kept"]) == (0, 1, 1), got
        packs = listing(c, url, ".packs")
        assert len(packs) == 1 and list(kept) == packs  # the first pack: b's last commit
        assert restored(url, "a.mote", tmp_path / "ra.mote", c)[1] == want_a
        assert restored(url, "b.mote", tmp_path / "rb.mote", c)[1] == want_b
        one = commits["a.mote"][0][0]  # only in the pack kept for b's sake: still exact
        assert restored(url, "a.mote", tmp_path / "r1.mote", c, txnid=one) == commits["a.mote"][0]
        two = commits["a.mote"][1][0]  # its pack is gone: the commit before it that is left
        assert restored(url, "a.mote", tmp_path / "r2.mote", c, txnid=two)[0] in (one, base_a)
        # the kept pack is not read again while it holds what it held
        ranged = []
        c.c.meta.events.register("before-send.s3", lambda request, **kw: ranged.append(
            request.headers.get("Range")))
        got = replicate.prune(url, retention=0, client=c, now=time.time() + 5, kept=kept)
        assert (got["packs"], got["packs_kept"], got["requests"]) == (0, 1, 1)
        assert not any(ranged)
        # b ships an object of its own: its packed commit is taken in, the pack goes
        rep.stores["b.mote"]["anchor_time"] -= 3600
        b.box(Memo).put(Memo(text="alpha four", level=4))
        assert rep.ship() == 1
        want_b = rows(b)
        got = replicate.prune(url, retention=0, client=c, now=time.time() + 5, kept=kept)
        assert (got["packs"], got["packs_kept"]) == (1, 0) and kept == {}
        assert listing(c, url, ".packs") == []
    assert restored(url, "b.mote", tmp_path / "rb2.mote", c)[1] == want_b
    assert restored(url, "a.mote", tmp_path / "ra2.mote", c)[1] == want_a


def test_prune_deletes_older_generations_after_the_retention(tmp_path, s3):
    """A generation goes once the next one's base is older than the retention; the
    newest stays whole and restores; a commit of a deleted generation is gone; a
    retention longer than the history deletes nothing."""
    c, url = s3
    rep = replicate.Replicator(url, client=c, full_every=3, packs=False)
    with motedb.open(tmp_path / "g.mote") as s:
        rep.add(s)
        box = s.box(Memo)
        first = None
        for i in range(8):
            box.put(Memo(text=f"alpha {i}", level=i))
            first = first or s.commit
            rep.ship()
        want = rows(s)
    everything = listing(c, url)
    gens = sorted({p["generation"] for p in replicate.points(url, "g.mote", client=c)})
    assert len(gens) == 2 and len(everything) == 8
    assert replicate.prune(url, retention=3600, client=c)["objects"] == 0
    assert listing(c, url) == everything
    got = replicate.prune(url, retention=0, client=c, now=time.time() + 5)
    assert got["objects"] == 4 and got["packs"] == 0, got  # generation 1: base and 3 deltas
    left = replicate.points(url, "g.mote", client=c)
    assert {p["generation"] for p in left} == {gens[1]} and len(left) == 4
    assert restored(url, "g.mote", tmp_path / "r.mote", c)[1] == want
    with pytest.raises(motedb.NotFoundError):
        replicate.restore(url, "g.mote", tmp_path / "old.mote", txnid=first, client=c)
    assert replicate.prune(url, retention=0, client=c, now=time.time() + 5)["objects"] == 0


def test_run_prunes_beside_its_passes(tmp_path, s3):
    """run() prunes every prune_every seconds in a thread of its own, with the rate
    bound: a pack taken in goes while the replicator ships."""
    c, url = s3
    rep = replicate.Replicator(url, client=c, interval=0.05, retention=0)
    with motedb.open(tmp_path / "r.mote") as s:
        rep.add(s)
        packed_then_own(rep, c, url, s, "r.mote")
        time.sleep(1.1)  # (LastModified is to the second: the pack before the cutoff)
        rep.prune_every = 0.2
        stop = threading.Event()
        t = threading.Thread(target=rep.run, args=(stop,))
        t.start()
        try:
            for _ in range(100):
                if not listing(c, url, ".packs"):
                    break
                time.sleep(0.05)
        finally:
            stop.set()
            t.join()
        assert listing(c, url, ".packs") == [] and rep.pruned["packs"] == 1, rep.errors
        want = rows(s)
    assert restored(url, "r.mote", tmp_path / "back.mote", c)[1] == want
    with pytest.raises(ValueError):
        replicate.Replicator(url, client=c, retention=-1)
    with pytest.raises(ValueError):
        replicate.prune(url, retention=-1, client=c)


def test_restore_skips_a_pack_pruned_after_its_listing(tmp_path, s3):
    """A prune may delete a pack between a restore's listing and its read of it: a
    pack it deletes holds nothing the restore needs, so the restore goes on."""
    c, url = s3
    rep = replicate.Replicator(url, client=c)
    with motedb.open(tmp_path / "p.mote") as s:
        rep.add(s)
        packed_then_own(rep, c, url, s, "p.mote")
        want = rows(s)
    # an older object of its own, then: the restore looks in the packs of its span
    first = replicate.points(url, "p.mote", client=c)[0]

    class Pruning:  # deletes each pack just before the restore reads it
        def __getattr__(self, name):
            return getattr(c, name)

        def get_object(self, **kw):
            if "/.packs/" in kw["Key"]:
                c.delete_object(Bucket=kw["Bucket"], Key=kw["Key"])
            return c.get_object(**kw)

    assert replicate.restore(url, "p.mote", tmp_path / "r.mote", client=Pruning()) > first["to"]
    assert rows(str(tmp_path / "r.mote")) == want
    assert listing(c, url, ".packs") == []


def test_prune_goes_store_by_store_through_a_paged_listing(tmp_path, s3):
    """Stores' objects listed a few keys a page (as a large bucket is, a thousand): each
    store's older generations go, its newest stays and restores, whatever the page
    boundaries."""
    c, url = s3

    class Paged:  # two keys a listing page
        def __getattr__(self, name):
            return getattr(c, name)

        def list_objects_v2(self, **kw):
            return c.list_objects_v2(MaxKeys=2, **kw)

    rep = replicate.Replicator(url, client=c, full_every=2, packs=False)
    names = ["a.mote", "a.mote.old", "b.mote"]  # ("a.mote.old/" lists before "a.mote/")
    stores = [motedb.open(tmp_path / n) for n in names]
    try:
        for s in stores:
            rep.add(s)
        for i in range(5):
            for s in stores:
                s.box(Memo).put(Memo(text=f"alpha {i}", level=i))
            rep.ship()
        want = [rows(s) for s in stores]
    finally:
        for s in stores:
            s.close()
    gens = {n: sorted({p["generation"] for p in replicate.points(url, n, client=c)})
            for n in names}
    assert all(len(g) == 2 for g in gens.values()), gens
    got = replicate.prune(url, retention=0, client=Paged(), now=time.time() + 5)
    assert got["objects"] == 3 * 3 and got["packs"] == 0, got  # each: a base and 2 deltas
    assert got["requests"] >= 15 // 2 + 1  # (15 objects, two a page, and a delete)
    for n, w in zip(names, want):
        assert {p["generation"] for p in replicate.points(url, n, client=c)} == {gens[n][1]}
        assert restored(url, n, tmp_path / f"r-{n}", c)[1] == w


def pack_bytes(entries):
    """A pack of (name, body) deltas as the replicator writes it."""
    index, off = [], 0
    for name, body in entries:
        index.append({"name": name, "generation": 1, "ident": 7, "to": 5, "since": 4,
                      "comp": "z", "off": off, "len": len(body)})
        off += len(body)
    head = json.dumps(index).encode()
    return replicate._PACK_MAGIC + len(head).to_bytes(4, "little") + head + b"".join(
        b for _, b in entries)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_damaged_pack_is_refused_as_damaged(data):
    """A pack read from the bucket (its index, by ranged reads) gives its index or
    CorruptError, whatever its bytes: random ones, or a pack with bytes flipped,
    cut short or grown."""
    good = pack_bytes([("a.mote", b"x" * 40), ("b.mote", b"y" * 9)])
    kind = data.draw(st.sampled_from(["random", "flip", "cut", "grow"]))
    if kind == "random":
        raw = data.draw(st.binary(max_size=300))
    elif kind == "flip":
        raw = bytearray(good)
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] ^= 1 << data.draw(st.integers(0, 7))
        raw = bytes(raw)
    elif kind == "cut":
        raw = good[:data.draw(st.integers(0, len(good) - 1))]
    else:
        raw = good[:12] + data.draw(st.binary(min_size=1, max_size=40)) + good[12:]

    def get(key, start, end):
        return raw[start:end]

    try:
        index, start, head = replicate._pack_index(get, "p.pack")
    except motedb.CorruptError:
        return
    assert isinstance(index, list) and start <= len(head)
    for e in index:
        assert isinstance(e["name"], str) and e["off"] >= 0 and e["len"] >= 0


def test_prune_leaves_a_damaged_pack_alone(tmp_path, s3):
    """A pack whose index cannot be read is counted and kept; the prune goes on."""
    c, url = s3
    bucket, prefix = replicate.parse_url(url)
    rep = replicate.Replicator(url, client=c)
    with motedb.open(tmp_path / "d.mote") as s:
        rep.add(s)
        packed_then_own(rep, c, url, s, "d.mote")
    bad = f"{prefix}/.packs/0000000000001-00000000.pack"
    c.put_object(Bucket=bucket, Key=bad, Body=b"MOTEPAK1\x05\x00\x00\x00{oops")
    got = replicate.prune(url, retention=0, client=c, now=time.time() + 5)
    assert (got["packs"], got["packs_damaged"]) == (1, 1), got
    assert listing(c, url, ".packs") == [bad]
