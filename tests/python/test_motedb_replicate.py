"""motedb.replicate against a real S3 API server on loopback (moto's server mode, from
tests/python/requirements-integrations.txt): a store shipped and restored equals the
store at the commit restored; an idle store costs no request; a replicator that restarts
goes on from the bucket; a server that fails is retried. The data is synthetic."""

import os
import subprocess
import sys
import threading
from typing import Annotated

import pytest

import motedb
from motedb import replicate

boto3 = pytest.importorskip("boto3")
moto_server = pytest.importorskip("moto.server")


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
        self.c.meta.events.register("before-send.s3", self._count)

    def _count(self, **kw):
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
    rep = replicate.Replicator(url, client=c, full_every=3)
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
    with motedb.open(src, readonly=True) as s:
        last = s.commit
        want = rows(s)
    for _ in range(500):  # until the last commit is shipped
        if rep.stores["w.mote"].get("to") == last:
            break
        threading.Event().wait(0.01)
    stop.set()
    t.join()
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
        real = c.c.upload_file

        def upload_then_fail(*a, **kw):
            real(*a, **kw)
            raise ConnectionError("the answer was lost (test)")
        c.c.upload_file = upload_then_fail
        box.put(Memo(text="alpha two"))
        assert rep.ship() == 0 and rep.errors
        c.c.upload_file = real
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


def test_server_errors_throttling_and_slow_answers(tmp_path, s3):
    """HTTP 500s, throttling (503 SlowDown) and slow answers from the server, at random
    requests: failed passes are retried from the last commit shipped, and the newest
    shipped state restores to the store."""
    import random
    import time

    from botocore.exceptions import ClientError

    c, url = s3
    rng = random.Random(11)
    hits = {"500": 0, "503": 0, "slow": 0}

    def flaky(**kw):
        r = rng.random()
        if r < 0.15:
            hits["500"] += 1
            raise ClientError({"Error": {"Code": "InternalError", "Message": "test"},
                               "ResponseMetadata": {"HTTPStatusCode": 500}}, "PutObject")
        if r < 0.3:
            hits["503"] += 1
            raise ClientError({"Error": {"Code": "SlowDown", "Message": "test"},
                               "ResponseMetadata": {"HTTPStatusCode": 503}}, "PutObject")
        if r < 0.4:
            hits["slow"] += 1
            time.sleep(0.05)

    src = str(tmp_path / "f.mote")
    rep = replicate.Replicator(url, client=c)
    with motedb.open(src) as s:
        rep.add(s)
        box = s.box(Memo)
        c.c.meta.events.register("before-send.s3", flaky)
        for i in range(60):
            box.put(Memo(text=f"alpha {i}", level=i))
            rep.ship()
        c.c.meta.events.unregister("before-send.s3", flaky)
        while rep.ship():  # the server well again: one pass brings it level
            pass
        assert rep.stores["f.mote"]["to"] == s.commit
        want = rows(s)
    assert rep.errors and min(hits.values()) > 0
    assert restored(url, "f.mote", tmp_path / "r.mote", c)[1] == want


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
    """`mote replicate` and `mote restore` (the C tool hands them to this module)."""
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
