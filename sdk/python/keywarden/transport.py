"""The HTTP layer, replaceable through the ``transport`` option.

The default transport is built on http.client (not urllib) because a heartbeat must know whether
its request can have reached the server: a connection that was never established means nothing
was sent and the same beat may be sent again; anything later means the server may have acted on
it. Each call runs on a short-lived worker thread so the caller's deadline is strict (a hung
server, a slow DNS answer or a server trickling one byte at a time all end at ``timeout``).
"""
from __future__ import annotations

import base64
import http.client
import socket
import ssl
import threading
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Tuple
from urllib.parse import unquote, urlsplit

__all__ = [
    "TransportRequest",
    "TransportResponse",
    "TransportError",
    "Transport",
    "DefaultTransport",
]


@dataclass(frozen=True)
class TransportRequest:
    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes
    timeout: float
    """Seconds for the whole exchange."""


@dataclass(frozen=True)
class TransportResponse:
    status: int
    headers: Mapping[str, str]
    """Header names lower-cased (the client lower-cases them again, for custom transports)."""
    body: bytes


class TransportError(Exception):
    """What a transport raises.

    ``sent=False`` promises that no byte of the request reached the server (connection refused,
    DNS failure, proxy refused the tunnel): the client may send the same request again. Any other
    exception a custom transport raises counts as ``network`` with ``sent=True``.
    """

    def __init__(self, kind: str, sent: bool, message: str) -> None:
        if kind not in ("network", "timeout"):
            raise ValueError("kind is 'network' or 'timeout'")
        super().__init__(message)
        self.kind = kind
        self.sent = sent


Transport = Callable[[TransportRequest], TransportResponse]


@dataclass
class _Attempt:
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: threading.Event = field(default_factory=threading.Event)
    sent: bool = False
    abandoned: bool = False
    conn: Optional[http.client.HTTPConnection] = None
    result: Optional[TransportResponse] = None
    error: Optional[TransportError] = None

    def finish(self, result: Optional[TransportResponse] = None, error: Optional[TransportError] = None) -> None:
        with self.lock:
            if self.abandoned:
                return
            self.result = result
            self.error = error
            self.done.set()


def _is_timeout(e: BaseException) -> bool:
    return isinstance(e, (socket.timeout, TimeoutError))


def _describe(e: BaseException) -> str:
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


class DefaultTransport:
    """http.client over a fresh connection per call.

    Args:
        proxy: ``http://[user:pass@]host:port`` of an HTTP proxy (CONNECT for https targets).
        max_response_bytes: larger answers are a ``network`` error. Default 1 MiB.
        ssl_context: for https; default ``ssl.create_default_context()`` (certificates verified).
    """

    def __init__(
        self,
        proxy: Optional[str] = None,
        max_response_bytes: int = 1 << 20,
        ssl_context: Optional[ssl.SSLContext] = None,
    ) -> None:
        self.max_response_bytes = max_response_bytes
        self._ssl = ssl_context
        self._proxy: Optional[Tuple[str, int]] = None
        self._proxy_auth: Optional[str] = None
        if proxy:
            p = urlsplit(proxy)
            if p.scheme != "http" or not p.hostname:
                raise ValueError("proxy must be an http://host:port URL")
            self._proxy = (p.hostname, p.port or 80)
            if p.username is not None:
                cred = f"{unquote(p.username)}:{unquote(p.password or '')}".encode("utf-8")
                self._proxy_auth = "Basic " + base64.b64encode(cred).decode("ascii")

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    def _connection(self, req: TransportRequest) -> Tuple[http.client.HTTPConnection, str]:
        """(connection, request target) for this request."""
        u = urlsplit(req.url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise TransportError("network", False, f"unsupported URL {req.url!r}")
        secure = u.scheme == "https"
        port = u.port or (443 if secure else 80)
        target = (u.path or "/") + (f"?{u.query}" if u.query else "")
        conn: http.client.HTTPConnection
        if self._proxy is None:
            if secure:
                conn = http.client.HTTPSConnection(u.hostname, port, timeout=req.timeout, context=self._context())
            else:
                conn = http.client.HTTPConnection(u.hostname, port, timeout=req.timeout)
            return conn, target
        host, pport = self._proxy
        if secure:
            conn = http.client.HTTPSConnection(host, pport, timeout=req.timeout, context=self._context())
            tunnel_headers = {"Proxy-Authorization": self._proxy_auth} if self._proxy_auth else None
            conn.set_tunnel(u.hostname, port, headers=tunnel_headers)
            return conn, target
        # Plain HTTP through the proxy: the absolute URI is the request target.
        conn = http.client.HTTPConnection(host, pport, timeout=req.timeout)
        return conn, req.url.split("#", 1)[0]

    def __call__(self, req: TransportRequest) -> TransportResponse:
        conn, target = self._connection(req)
        state = _Attempt()
        worker = threading.Thread(target=self._run, args=(req, conn, target, state), name="keywarden-http", daemon=True)
        worker.start()
        if not state.done.wait(req.timeout):
            with state.lock:
                if not state.done.is_set():
                    state.abandoned = True
            if state.abandoned:
                # From here the worker sends nothing more; wake any read it is blocked in.
                self._abort(state.conn)
                raise TransportError("timeout", state.sent, f"no answer within {req.timeout:g} s")
        if state.error is not None:
            raise state.error
        assert state.result is not None
        return state.result

    @staticmethod
    def _abort(conn: Optional[http.client.HTTPConnection]) -> None:
        sock = getattr(conn, "sock", None) if conn is not None else None
        if sock is None:
            return
        try:
            # The plain socket method, also for an SSLSocket: shutdown(2) on the descriptor wakes a
            # blocked read without touching the SSL object the worker thread is using.
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except (OSError, ValueError, TypeError):
            pass

    def _run(self, req: TransportRequest, conn: http.client.HTTPConnection, target: str, state: _Attempt) -> None:
        with state.lock:
            if state.abandoned:
                return
            state.conn = conn
        try:
            try:
                conn.connect()
            except BaseException as e:  # noqa: BLE001 - every failure becomes a typed error
                state.finish(error=TransportError("timeout" if _is_timeout(e) else "network", False, _describe(e)))
                return
            with state.lock:
                if state.abandoned:
                    return
                state.sent = True
            try:
                headers: Dict[str, str] = dict(req.headers)
                headers.setdefault("Connection", "close")
                if self._proxy is not None and self._proxy_auth and not target.startswith("/"):
                    headers["Proxy-Authorization"] = self._proxy_auth
                conn.request(req.method, target, body=req.body, headers=headers)
                resp = conn.getresponse()
                body = self._read_body(resp)
                merged: Dict[str, str] = {}
                for name, value in resp.getheaders():
                    k = name.lower()
                    merged[k] = f"{merged[k]}, {value}" if k in merged else value
                state.finish(result=TransportResponse(status=resp.status, headers=merged, body=body))
            except TransportError as e:
                state.finish(error=e)
            except BaseException as e:  # noqa: BLE001
                state.finish(error=TransportError("timeout" if _is_timeout(e) else "network", True, _describe(e)))
        finally:
            try:
                conn.close()
            except Exception:  # noqa: BLE001
                pass

    def _read_body(self, resp: http.client.HTTPResponse) -> bytes:
        limit = self.max_response_bytes
        declared = resp.getheader("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > limit:
            raise TransportError("network", True, f"response larger than {limit} bytes")
        chunks: List[bytes] = []
        size = 0
        while True:
            chunk = resp.read(min(65536, limit + 1 - size))
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                raise TransportError("network", True, f"response larger than {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)
