"""A counting, timestamping HTTP reverse proxy: each replicator talks to the S3 API server through one of these,
so both are measured the same way, on the wire.

Every request is forwarded as it came (method, path, query, headers, body bytes) over a kept-alive connection
to the upstream server, and its answer is passed back (streamed when it has a length). For each one a record
is kept: when the request began to arrive and when the upstream's answer had come back (the object a PUT wrote
is visible in the bucket from then on), the method, the path and query, the bytes of the request (its head
and its body), of the answer, and the status. With ``capture`` set, the bodies of PUTs whose key matches it
(and that are at most ``capture_max`` bytes) are kept too, for the caller to read which commits they hold.

Standard library only (http.server, http.client), one thread per client connection.
"""

import http.client
import http.server
import re
import socket
import socketserver
import threading
import time
from dataclasses import dataclass, field

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
              "expect"}


@dataclass
class Record:
    t0: float            # time.time() when the request line was read
    t1: float            # time.time() when the upstream's answer (status, headers, body) was in
    method: str
    path: str            # without the query
    query: str
    req_head_bytes: int  # request line and headers as received
    req_body_bytes: int  # body bytes as received (what the client shipped)
    resp_bytes: int      # answer body bytes
    status: int
    body: bytes | None = field(default=None, repr=False)  # captured PUT body (see Proxy.capture)

    @property
    def key(self):
        """The object key of a path-style request (/bucket/key...), '' for bucket-level requests."""
        parts = self.path.lstrip("/").split("/", 1)
        return parts[1] if len(parts) > 1 else ""

    def kind(self):
        """What the request is, in S3's terms: PUT, GET, HEAD, DELETE, LIST, multipart steps, ..."""
        q = self.query
        if self.method == "GET" and not self.key:
            return "LIST"
        if self.method == "POST" and "uploads" in q.split("&"):
            return "CREATE_MULTIPART"
        if self.method == "PUT" and "partNumber=" in q:
            return "UPLOAD_PART"
        if self.method == "POST" and "uploadId=" in q:
            return "COMPLETE_MULTIPART"
        if self.method == "POST" and "delete" in q.split("&"):
            return "DELETE_OBJECTS"
        return self.method

    def wrote_object(self):
        """Whether this request made an object visible (a PUT of a whole object, or a completed multipart
        upload) and succeeded."""
        return 200 <= self.status < 300 and self.kind() in ("PUT", "COMPLETE_MULTIPART") and bool(self.key)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # keep-alive, as the clients expect
    server: "_Server"

    def log_message(self, *args):  # quiet
        pass

    def setup(self):
        super().setup()
        # No Nagle: an answer written in two pieces would otherwise wait for the client's delayed ACK (40 ms)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _upstream(self):
        conn = getattr(self, "_conn", None)
        if conn is None:
            host, port = self.server.upstream
            conn = self._conn = http.client.HTTPConnection(host, port, timeout=120)
            conn.connect()
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def _read_body(self):
        n = self.headers.get("Content-Length")
        if n is not None:
            return self.rfile.read(int(n))
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            out = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                        pass
                    break
                out.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(out)
        return b""

    def _forward(self):
        t0 = time.time()
        head_bytes = len(self.requestline) + 2 + sum(len(k) + len(v) + 4 for k, v in self.headers.items()) + 2
        body = self._read_body()
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        if body or self.command in ("PUT", "POST"):
            headers["Content-Length"] = str(len(body))
        path, _, query = self.path.partition("?")
        for attempt in (0, 1):  # a kept-alive upstream connection may have been closed: one retry on a new one
            conn = self._upstream()
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                break
            except (http.client.HTTPException, ConnectionError, OSError):
                conn.close()
                self._conn = None
                if attempt:
                    raise
        length = resp.getheader("Content-Length")
        stream = self.command != "HEAD" and length is not None and int(length) > (1 << 20)
        data = b"" if stream else resp.read()
        t1 = time.time()
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                self.send_header(k, v)
        if self.command == "HEAD":
            self.send_header("Content-Length", length or "0")
        else:
            self.send_header("Content-Length", length if stream else str(len(data)))
        sent = 0
        if data:  # the head and a small body in one write
            self._headers_buffer.append(b"\r\n" + data)
            self.flush_headers()
            sent = len(data)
        else:
            self.end_headers()
        if stream:
            left = int(length)
            while left > 0:
                chunk = resp.read(min(left, 1 << 20))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)
                sent += len(chunk)
            t1 = time.time()
        rec = Record(t0, t1, self.command, path, query, head_bytes, len(body), sent, resp.status)
        cap = self.server.proxy.capture
        if (cap is not None and self.command == "PUT" and len(body) <= self.server.proxy.capture_max
                and cap.search(path)):
            rec.body = body
        self.server.proxy._add(rec)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    def finish(self):
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()
        super().finish()


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class Proxy:
    """A proxy on 127.0.0.1 (a free port) to the server at `upstream` ("http://host:port")."""

    def __init__(self, upstream, capture=None, capture_max=8 << 20):
        m = re.match(r"^http://([^/:]+):(\d+)/?$", upstream)
        if not m:
            raise ValueError(f"upstream must be http://host:port, not {upstream!r}")
        self.capture = re.compile(capture) if isinstance(capture, str) else capture
        self.capture_max = capture_max
        self.records: list[Record] = []
        self._lock = threading.Lock()
        self._srv = _Server(("127.0.0.1", 0), _Handler)
        self._srv.upstream = (m.group(1), int(m.group(2)))
        self._srv.proxy = self
        self.url = f"http://127.0.0.1:{self._srv.server_address[1]}"
        self._thread = threading.Thread(target=self._srv.serve_forever, kwargs={"poll_interval": 0.1},
                                        daemon=True)
        self._thread.start()

    def _add(self, rec):
        with self._lock:
            self.records.append(rec)

    def snapshot(self):
        """The records so far (a copy)."""
        with self._lock:
            return list(self.records)

    def close(self):
        self._srv.shutdown()
        self._srv.server_close()
