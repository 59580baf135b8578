"""The realtime channel (the server's docs/protocol.md, "Realtime channel"): heartbeat calls over one
WebSocket and pushes (revoked, update_required, notice), standard library plus ``cryptography``.

Nothing is believed unverified: the hello must be signed by a pinned key over THIS client's
session and fresh X25519 key; every later frame must carry this connection's MAC and the next
sequence number. A frame that fails is refused: the connection is dropped, the message ignored.
The WebSocket client is minimal (RFC 6455: masked client frames, fragments, ping/pong, close) and
runs one daemon reader thread per connection.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import random
import socket
import ssl
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union
from urllib.parse import urlsplit

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .codes import ErrorCode, VerificationReason
from .crypto import canonical_request, decode_signature, ed25519_verify, request_signature
from .errors import KeywardenError, error_from_answer, verification_error
from .verify import PinnedKeys, SignedAnswer, verify_response

__all__ = [
    "CHANNEL_PATH", "channel_transcript", "channel_keys", "seal_frame", "open_frame", "verify_channel_hello",
    "read_channel_frame", "ChannelConnection", "ChannelLink", "ChannelContext", "Push",
]

CHANNEL_PATH = "/api/client/ws"
WINDOW_SECONDS = 300
_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_MAX_MESSAGE = 1 << 20
# Close codes after which the channel is not reopened for this session (stop, superseded, revoked, idle).
_FINAL_CLOSE = frozenset({1000, 4001, 4003, 4008})


# --- crypto (sdk/vectors/channel.json) ----------------------------------------------------------
def channel_transcript(kid: str, ts: int, session: str, client_key: str, server_key: str, conn: str, beat_interval: int) -> str:
    """ "kwc1-hello" \\n kid \\n ts \\n session \\n client_key \\n server_key \\n conn \\n beat_interval"""
    return "\n".join(["kwc1-hello", kid, str(ts), session, client_key, server_key, conn, str(beat_interval)])


def _b64url_decode(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def public_key_b64url(private_key: X25519PrivateKey) -> str:
    raw = private_key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def channel_keys(private_key: X25519PrivateKey, server_key: str, transcript: str) -> Tuple[bytes, bytes]:
    """(s2c, c2s): HKDF-SHA256(X25519 secret, salt = sha256(transcript), info "kwc1 keys", 64).
    Raises ValueError for an unusable server key (malformed, or of low order)."""
    raw = _b64url_decode(server_key)
    if len(raw) != 32:
        raise ValueError("server_key is not 32 bytes")
    shared = private_key.exchange(X25519PublicKey.from_public_bytes(raw))  # raises for an all-zero result
    okm = HKDF(algorithm=hashes.SHA256(), length=64, salt=hashlib.sha256(transcript.encode("utf-8")).digest(), info=b"kwc1 keys").derive(shared)
    return okm[:32], okm[32:]


def seal_frame(key: bytes, payload: bytes) -> bytes:
    """HMAC-SHA256(key, payload) || payload."""
    return hmac.new(key, payload, hashlib.sha256).digest() + payload


def open_frame(key: bytes, frame: bytes) -> Optional[bytes]:
    """The payload when the MAC verifies (constant time), else None."""
    if len(frame) <= 32:
        return None
    payload = frame[32:]
    return payload if hmac.compare_digest(hmac.new(key, payload, hashlib.sha256).digest(), frame[:32]) else None


def verify_channel_hello(
    keys: PinnedKeys, now: float, session: str, client_key: str, private_key: X25519PrivateKey, raw: Union[str, bytes]
) -> Tuple[bytes, bytes]:
    """Verifies the hello as the client whose session and key made the upgrade; returns (s2c, c2s).
    Checks in order: malformed, unknown_kid, bad_base64, stale, bad_signature."""
    try:
        h = json.loads(raw)
    except (ValueError, RecursionError):
        raise verification_error(VerificationReason.MALFORMED, "channel hello is not JSON") from None
    if not isinstance(h, dict) or h.get("type") != "hello" or not all(
        isinstance(h.get(k), str) for k in ("kid", "sig", "server_key", "conn")
    ) or not all(isinstance(h.get(k), int) and not isinstance(h.get(k), bool) for k in ("ts", "beat_interval")):
        raise verification_error(VerificationReason.MALFORMED, "channel hello lacks fields")
    key = keys.get(h["kid"])
    if key is None:
        raise verification_error(VerificationReason.UNKNOWN_KID, f"channel hello signed by unpinned key {h['kid']!r}")
    sig = decode_signature(h["sig"])
    if sig is None:
        raise verification_error(VerificationReason.BAD_BASE64, "channel hello signature is not base64 of 64 bytes")
    if abs(h["ts"] - now) > WINDOW_SECONDS:
        raise verification_error(VerificationReason.STALE, f"channel hello timestamp {h['ts']} is off")
    transcript = channel_transcript(h["kid"], h["ts"], session, client_key, h["server_key"], h["conn"], h["beat_interval"])
    if not ed25519_verify(key, transcript, sig):
        raise verification_error(VerificationReason.BAD_SIGNATURE, "channel hello does not verify")
    try:
        return channel_keys(private_key, h["server_key"], transcript)
    except ValueError:
        raise verification_error(VerificationReason.MALFORMED, "channel hello carries an unusable server key") from None


def read_channel_frame(s2c: bytes, expected_seq: int, frame: bytes, binary: bool = True) -> Union[Dict[str, Any], Tuple[VerificationReason, str]]:
    """One server frame: the message, or (reason, what) when refused: bad_mac, malformed, out_of_order."""
    if not binary:
        return VerificationReason.MALFORMED, "text frame after the hello"
    payload = open_frame(s2c, frame)
    if payload is None:
        return VerificationReason.BAD_MAC, "channel frame MAC does not verify"
    try:
        m = json.loads(payload.decode("utf-8"))
    except (ValueError, RecursionError):
        return VerificationReason.MALFORMED, "channel frame is not JSON"
    if not isinstance(m, dict):
        return VerificationReason.MALFORMED, "channel frame is not a JSON object"
    seq = m.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq != expected_seq:
        return VerificationReason.OUT_OF_ORDER, f"channel frame {seq!r} where {expected_seq} was due"
    return m


# --- a minimal WebSocket client ------------------------------------------------------------------
class _WebSocket:
    def __init__(self, sock: socket.socket, rest: bytes) -> None:
        self._sock = sock
        self._buf = rest
        self._send_lock = threading.Lock()
        self._closed = False
        self.on_message: Callable[[bytes, bool], None] = lambda data, binary: None
        self.on_close: Callable[[int, str], None] = lambda code, reason: None

    def start(self) -> None:
        threading.Thread(target=self._read_loop, name="keywarden-channel", daemon=True).start()

    def send(self, data: bytes, opcode: int = 0x2) -> bool:
        mask = os.urandom(4)
        n = len(data)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + n.to_bytes(2, "big")
        else:
            head += bytes([0x80 | 127]) + n.to_bytes(8, "big")
        masked = bytes(b ^ mask[i & 3] for i, b in enumerate(data))
        try:
            with self._send_lock:
                self._sock.sendall(head + mask + masked)
            return True
        except OSError:
            return False

    def close(self, code: int = 1000) -> None:
        if not self._closed:
            self.send(code.to_bytes(2, "big"), 0x8)
        self._shutdown()

    def terminate(self) -> None:
        self._shutdown()

    def _shutdown(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self._sock.close()
        except OSError:
            pass

    def _read(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _read_loop(self) -> None:
        code, reason = 1006, ""
        fragments: List[bytes] = []
        binary = False
        try:
            while True:
                b0, b1 = self._read(2)
                if b1 & 0x80:
                    break  # a server must not mask
                n = b1 & 0x7F
                if n == 126:
                    n = int.from_bytes(self._read(2), "big")
                elif n == 127:
                    n = int.from_bytes(self._read(8), "big")
                if n > _MAX_MESSAGE:
                    break
                payload = self._read(n)
                opcode = b0 & 0x0F
                if opcode in (0x0, 0x1, 0x2):
                    if opcode != 0x0:
                        fragments, binary = [], opcode == 0x2
                    fragments.append(payload)
                    if b0 & 0x80:
                        self.on_message(b"".join(fragments), binary)
                        fragments = []
                elif opcode == 0x8:
                    if len(payload) >= 2:
                        code, reason = int.from_bytes(payload[:2], "big"), payload[2:].decode("utf-8", "replace")
                    else:
                        code = 1005
                    self.send(payload[:2], 0x8)
                    break
                elif opcode == 0x9:
                    self.send(payload, 0xA)
        except (OSError, ConnectionError, ValueError):
            pass
        self._closed = True
        self._shutdown()
        self.on_close(code, reason)


@dataclass
class _Refused:
    status: int
    headers: Dict[str, str]
    body: bytes


def _open_websocket(url: str, headers: Mapping[str, str], timeout: float) -> Union[_WebSocket, _Refused]:
    u = urlsplit(url)
    secure = u.scheme == "https"
    port = u.port or (443 if secure else 80)
    sock = socket.create_connection((u.hostname or "", port), timeout=timeout)
    try:
        if secure:
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=u.hostname)
        key = base64.b64encode(os.urandom(16)).decode("ascii")
        host = u.hostname if u.port is None else f"{u.hostname}:{u.port}"
        lines = [f"GET {u.path or '/'} HTTP/1.1", f"Host: {host}", "Connection: Upgrade", "Upgrade: websocket",
                 "Sec-WebSocket-Version: 13", f"Sec-WebSocket-Key: {key}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed during the upgrade")
            buf += chunk
            if len(buf) > 65536:
                raise ConnectionError("upgrade answer too large")
        head, rest = buf.split(b"\r\n\r\n", 1)
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ")[1])
        got = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in header_lines if ":" in line)}
        if status != 101:
            length = int(got.get("content-length", "0") or 0)
            while len(rest) < min(length, 65536):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                rest += chunk
            sock.close()
            return _Refused(status, got, rest[:length])
        accept = base64.b64encode(hashlib.sha1((key + _GUID).encode("ascii")).digest()).decode("ascii")
        if got.get("sec-websocket-accept") != accept:
            raise ConnectionError("the server did not accept the WebSocket handshake")
        sock.settimeout(None)
        return _WebSocket(sock, rest)
    except BaseException:
        sock.close()
        raise


# --- one verified connection ---------------------------------------------------------------------
@dataclass(frozen=True)
class ChannelContext:
    base_url: str
    version: str
    api_secret: Optional[str]
    timeout: float
    open_timeout: float
    keys: PinnedKeys
    server_now: Callable[[], float]
    log: Any
    # The route the last REST answer named (X-Keywarden-Route), sent on the upgrade.
    route: Callable[[], Optional[str]] = lambda: None


@dataclass(frozen=True)
class Push:
    """A pushed message: ``type`` is "revoked", "update_required" or "notice"."""

    type: str
    reason: str = ""
    detail: Any = None
    message: str = ""
    latest_version: Optional[str] = None
    update_url: Optional[str] = None
    at: Optional[str] = None


class ChannelConnection:
    """One connection after a verified hello. ``on_push(Push)`` and ``on_close(code, error)`` run on
    the reader thread."""

    def __init__(self, ctx: ChannelContext, ws: _WebSocket, s2c: bytes, c2s: bytes) -> None:
        self._ctx = ctx
        self._ws = ws
        self._s2c = s2c
        self._c2s = c2s
        self._lock = threading.Lock()
        self._out = 0
        self._in = 0
        self._pending: Dict[int, Tuple[threading.Event, List[Any]]] = {}
        self._closed = False
        self.close_code = 0
        self.close_error: Optional[KeywardenError] = None
        self.on_push: Callable[[Push], None] = lambda p: None
        self.on_close: Callable[[int, Optional[KeywardenError]], None] = lambda code, err: None

    @property
    def open(self) -> bool:
        return not self._closed

    @classmethod
    def connect(cls, ctx: ChannelContext, session: str) -> Tuple[Optional["ChannelConnection"], Optional[KeywardenError], bool]:
        """(connection, None, True) or (None, error, offered); offered False: the server has no channel."""
        private = X25519PrivateKey.generate()
        client_key = public_key_b64url(private)
        headers = {"X-Session": session, "X-Nonce": client_key, "X-Client-Version": ctx.version}
        route = ctx.route()
        if route:
            headers["X-Keywarden-Route"] = route
        if ctx.api_secret:
            ts = str(int(ctx.server_now()))
            headers["X-Timestamp"] = ts
            headers["X-Signature"] = request_signature(ctx.api_secret, canonical_request("GET", CHANNEL_PATH, ts, client_key, b""))
        try:
            up = _open_websocket(ctx.base_url + CHANNEL_PATH, headers, ctx.open_timeout)
        except (OSError, ValueError, ConnectionError, IndexError) as e:
            return None, KeywardenError(ErrorCode.NETWORK, f"channel: {e}", not_sent=True), True
        if isinstance(up, _Refused):
            return None, cls._refusal(ctx, client_key, up), up.status not in (404, 405)
        first: List[Tuple[bytes, bool]] = []
        got = threading.Event()
        queue: List[Tuple[bytes, bool]] = []
        conn_box: List[ChannelConnection] = []
        lock = threading.Lock()

        def on_message(data: bytes, binary: bool) -> None:
            with lock:
                if not first:
                    first.append((data, binary))
                    got.set()
                elif conn_box:
                    conn_box[0]._receive(data, binary)
                else:
                    queue.append((data, binary))

        closed: List[int] = []

        def on_close(code: int, reason: str) -> None:
            closed.append(code)
            got.set()
            if conn_box:
                conn_box[0]._finish(code, None)

        up.on_message = on_message
        up.on_close = on_close
        up.start()
        if not got.wait(ctx.open_timeout) or not first:
            up.terminate()
            return None, KeywardenError(ErrorCode.NETWORK, "channel: no hello"), True
        data, binary = first[0]
        try:
            if binary:
                raise verification_error(VerificationReason.MALFORMED, "channel hello is not a text frame")
            s2c, c2s = verify_channel_hello(ctx.keys, ctx.server_now(), session, client_key, private, data)
        except KeywardenError as e:
            up.terminate()
            return None, e, True
        conn = cls(ctx, up, s2c, c2s)
        with lock:
            conn_box.append(conn)
            for d, b in queue:
                conn._receive(d, b)
            queue.clear()
        if closed:
            conn._finish(closed[0], None)
        return conn, None, True

    @staticmethod
    def _refusal(ctx: ChannelContext, nonce: str, r: _Refused) -> KeywardenError:
        try:
            verify_response(ctx.keys, SignedAnswer("GET", CHANNEL_PATH, r.status, r.headers, r.body, nonce), ctx.server_now(), WINDOW_SECONDS)
            detail = json.loads(r.body.decode("utf-8")).get("detail")
        except KeywardenError as e:
            return e  # unsigned (a proxy that does not pass WebSockets): nothing in it is believed
        except (ValueError, AttributeError):
            return verification_error(VerificationReason.MALFORMED, f"channel refusal {r.status} is not JSON")
        return error_from_answer(r.status, detail, r.headers.get("retry-after"))

    def call(self, op: str, body: Mapping[str, Any]) -> Dict[str, Any]:
        """One call; the success body, or the server's coded error; ``network`` with not_sent
        when the channel was already down (send it over REST instead)."""
        rest = {k: v for k, v in body.items() if k != "session"}
        done = threading.Event()
        slot: List[Any] = []
        with self._lock:
            if self._closed:
                raise KeywardenError(ErrorCode.NETWORK, "channel closed", not_sent=True)
            self._out += 1
            seq = self._out
            self._pending[seq] = (done, slot)
            frame = seal_frame(self._c2s, json.dumps({"seq": seq, "type": "call", "op": op, "body": rest}, separators=(",", ":")).encode("utf-8"))
            sent = self._ws.send(frame)
        if not sent:
            with self._lock:
                self._pending.pop(seq, None)
            raise KeywardenError(ErrorCode.NETWORK, "channel closed", not_sent=True)
        if not done.wait(self._ctx.timeout):
            with self._lock:
                self._pending.pop(seq, None)
            raise KeywardenError(ErrorCode.TIMEOUT, f"no answer to {op} on the channel within {self._ctx.timeout} s")
        result = slot[0]
        if isinstance(result, KeywardenError):
            raise result
        return result

    def close(self, code: int = 1000) -> None:
        self._ws.close(code)

    def _refuse(self, reason: VerificationReason, what: str) -> None:
        self._ctx.log.warning("keywarden.channel.refused: %s", reason.value)
        self._finish(1006, verification_error(reason, what))
        self._ws.terminate()

    def _receive(self, data: bytes, binary: bool) -> None:
        if self._closed:
            return
        r = read_channel_frame(self._s2c, self._in + 1, data, binary)
        if isinstance(r, tuple):
            self._refuse(*r)
            return
        self._in += 1
        kind = r.get("type")
        if kind == "reply":
            with self._lock:
                entry = self._pending.pop(r.get("re"), None) if isinstance(r.get("re"), int) else None
            if entry is None:
                return
            done, slot = entry
            body = r.get("body") if isinstance(r.get("body"), dict) else {}
            if r.get("status") == 200:
                slot.append(body if body.get("success") is True else verification_error(VerificationReason.MALFORMED, "channel reply lacks success: true"))
            else:
                retry = r.get("retry_after")
                slot.append(error_from_answer(int(r.get("status") or 0), body.get("detail"), str(retry) if retry is not None else None))
            done.set()
        elif kind == "revoked":
            self.on_push(Push("revoked", reason=str(r.get("reason") or ""), detail=str(r.get("detail") or "")))
        elif kind == "update_required":
            d = r.get("detail") if isinstance(r.get("detail"), dict) else {}
            self.on_push(Push(
                "update_required", detail=r.get("detail"), message=str(d.get("message") or "A new version is required."),
                latest_version=d.get("latest_version") if isinstance(d.get("latest_version"), str) else None,
                update_url=d.get("update_url") if isinstance(d.get("update_url"), str) else None,
            ))
        elif kind == "notice":
            self.on_push(Push("notice", message=str(r.get("message") or ""), at=r.get("at") if isinstance(r.get("at"), str) else None))
        # pong, or a type of a newer server: verified, harmless to skip

    def _finish(self, code: int, error: Optional[KeywardenError]) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.close_code, self.close_error = code, error
            pending = list(self._pending.values())
            self._pending.clear()
        for done, slot in pending:
            # Sent, unanswered: the server may have acted on it (like a REST answer lost on the way).
            slot.append(error or KeywardenError(ErrorCode.NETWORK, f"channel closed ({code}) before the answer"))
            done.set()
        self.on_close(code, error)


class ChannelLink:
    """The heartbeat's channel: opens it, reopens it after a drop (0.5 s doubling up to 30 s), gives
    up when the server has none. ``sink(kind, payload)`` gets ("push", Push) and ("state", dict)."""

    def __init__(self, ctx: ChannelContext, session: str) -> None:
        self._ctx = ctx
        self._session = session
        self._conn: Optional[ChannelConnection] = None
        self._timer: Optional[threading.Timer] = None
        self._attempts = 0
        self._off = False
        self._lock = threading.RLock()
        self._sink: Optional[Callable[[str, Any], None]] = None
        self._backlog: List[Tuple[str, Any]] = []

    def attach(self, sink: Callable[[str, Any], None]) -> None:
        """Where pushes and state changes go; those that came before are delivered now."""
        with self._lock:
            self._sink = sink
            backlog, self._backlog = self._backlog, []
        for kind, payload in backlog:
            sink(kind, payload)

    def sink(self, kind: str, payload: Any) -> None:
        with self._lock:
            target = self._sink
            if target is None:
                self._backlog.append((kind, payload))
                return
        target(kind, payload)

    @property
    def ready(self) -> bool:
        c = self._conn
        return c is not None and c.open

    def connect(self) -> bool:
        with self._lock:
            if self._off:
                return False
            if self.ready:
                return True
            session = self._session
        conn, err, offered = ChannelConnection.connect(self._ctx, session)
        with self._lock:
            if self._off or session != self._session:
                if conn is not None:
                    conn.close()
                return False
            if conn is None:
                assert err is not None
                self._ctx.log.debug("keywarden.channel.unavailable: %s", err.message)
                transient = err.code in (ErrorCode.NETWORK, ErrorCode.TIMEOUT, ErrorCode.VERIFICATION, ErrorCode.RATE_LIMITED, ErrorCode.SERVER)
                if not offered or not transient:
                    self._off = True
                else:
                    self._retry(err.retry_after)
                self.sink("state", {"state": "closed", "error": err})
                return False
            self._attempts = 0
            self._conn = conn
        conn.on_push = lambda p: self.sink("push", p)
        conn.on_close = lambda code, e: self._closed(conn, code, e)
        self.sink("state", {"state": "open"})
        if not conn.open:  # refused a frame right behind the hello, before on_close was set
            self._closed(conn, conn.close_code or 1006, conn.close_error)
        return self.ready

    def _closed(self, conn: ChannelConnection, code: int, error: Optional[KeywardenError]) -> None:
        with self._lock:
            if self._conn is conn:
                self._conn = None
            if code in _FINAL_CLOSE:
                self._off = True
            else:
                self._retry()
        self.sink("state", {"state": "closed", "code": code, "error": error})

    def call(self, op: str, body: Mapping[str, Any]) -> Dict[str, Any]:
        c = self._conn
        if c is None:
            raise KeywardenError(ErrorCode.NETWORK, "channel closed", not_sent=True)
        return c.call(op, body)

    def rebind(self, session: str) -> bool:
        with self._lock:
            self._session = session
            old, self._conn = self._conn, None
            self._attempts = 0
            self._off = False
        if old is not None:
            old.close()
        return self.connect()

    def close(self) -> None:
        with self._lock:
            self._off = True
            if self._timer is not None:
                self._timer.cancel()
            old, self._conn = self._conn, None
        if old is not None:
            old.close()

    def _retry(self, hint: Optional[float] = None) -> None:
        if self._off:
            return
        base = min(30.0, 0.5 * 2 ** self._attempts)
        self._attempts += 1
        delay = max(hint or 0.0, base * (0.8 + random.random() * 0.4))
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(delay, self.connect)
        self._timer.daemon = True
        self._timer.start()
