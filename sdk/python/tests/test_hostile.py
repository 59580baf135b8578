"""Hostile and broken answers: through an injected transport (every refusal reason, malformed
bodies, failing transports) and, for the default transport, through real sockets (huge body,
hung server, trickling server, closed port, garbage, proxies). Every failure must be a typed
KeywardenError within the deadline: never a crash, never a hang."""
from __future__ import annotations

import base64
import json
import socket
import threading
import time
import unittest
from typing import Any, Callable, List, Optional

import _support
from _support import SECRET, FakeKeywarden, not_sent
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from keywarden import Client, DefaultTransport, ErrorCode, KeywardenError, TransportError, TransportRequest, TransportResponse


def refused(c: Client, test: unittest.TestCase) -> KeywardenError:
    with test.assertRaises(KeywardenError) as cm:
        c.init()
    test.assertIsNone(c.session, "nothing is believed from a refused answer")
    return cm.exception


def spoiled(spoil: Callable[[FakeKeywarden, TransportRequest, TransportResponse], TransportResponse], **options: Any) -> Client:
    fake = FakeKeywarden()
    fake.after = lambda req, res: spoil(fake, req, res)
    return Client.from_config(fake.config(), transport=fake, **options)


class RefusedSignatures(unittest.TestCase):
    def check(self, spoil: Callable[[FakeKeywarden, TransportRequest, TransportResponse], TransportResponse], reason: str) -> None:
        e = refused(spoiled(spoil), self)
        self.assertIs(e.code, ErrorCode.VERIFICATION)
        self.assertEqual(e.reason, reason)

    def test_unsigned(self) -> None:
        self.check(lambda f, q, r: TransportResponse(r.status, {"content-type": "application/json"}, r.body), "unsigned")

    def test_unknown_kid(self) -> None:
        self.check(lambda f, q, r: f.sign(q, r.status, r.body, kid="k9", key=Ed25519PrivateKey.generate()), "unknown_kid")

    def test_bad_base64(self) -> None:
        self.check(lambda f, q, r: TransportResponse(r.status, {**r.headers, "x-response-signature": "!!notbase64!!"}, r.body), "bad_base64")
        self.check(lambda f, q, r: TransportResponse(r.status, {**r.headers, "x-response-signature": base64.b64encode(b"x" * 63).decode()}, r.body), "bad_base64")

    def test_stale(self) -> None:
        self.check(lambda f, q, r: f.sign(q, r.status, r.body, shift=-1000), "stale")
        self.check(lambda f, q, r: TransportResponse(r.status, {**r.headers, "x-response-timestamp": "soon"}, r.body), "stale")

    def test_forged_body(self) -> None:
        self.check(lambda f, q, r: TransportResponse(r.status, r.headers, r.body.replace(b"Fake", b"Fako")), "bad_signature")

    def test_foreign_nonce(self) -> None:
        self.check(lambda f, q, r: f.sign(q, r.status, r.body, nonce="someone-elses-nonce-0001"), "bad_signature")

    def test_foreign_key_under_a_pinned_kid(self) -> None:
        self.check(lambda f, q, r: f.sign(q, r.status, r.body, key=Ed25519PrivateKey.generate()), "bad_signature")

    def test_changed_status(self) -> None:
        self.check(lambda f, q, r: TransportResponse(201, r.headers, r.body), "bad_signature")

    def test_failure_answers_are_verified_too(self) -> None:
        fake = FakeKeywarden()
        fake.handlers["init"] = lambda f, req, body: TransportResponse(403, {}, b'{"detail":"Application disabled"}')
        e = refused(Client.from_config(fake.config(), transport=fake), self)
        self.assertEqual((e.code, e.reason), (ErrorCode.VERIFICATION, "unsigned"))


class MalformedBodies(unittest.TestCase):
    def check(self, body: bytes, status: int = 200, **options: Any) -> KeywardenError:
        fake = FakeKeywarden(secret=SECRET if options.get("enc_key") else None)
        fake.handlers["init"] = lambda f, req, b: f.sign(req, status, body)
        return refused(Client.from_config(fake.config(), transport=fake, **options), self)

    def test_not_json(self) -> None:
        for body in [b"<html>hi</html>", b"", b"\xff\xfe\x00", b"[1,2]", b"null", b'"text"', b"{" * 10, b"[" * 200000]:
            with self.subTest(body=body[:12]):
                e = self.check(body)
                self.assertEqual((e.code, e.reason), (ErrorCode.VERIFICATION, "malformed"))

    def test_missing_fields(self) -> None:
        for obj in [{}, {"success": False}, {"success": "true", "session": "s", "app": {"name": "x"}},
                    {"success": True}, {"success": True, "session": 5, "app": {"name": "x"}}, {"success": True, "session": "s", "app": []}]:
            with self.subTest(obj=obj):
                self.assertEqual(self.check(json.dumps(obj).encode()).reason, "malformed")

    def test_huge_signed_body_from_a_custom_transport(self) -> None:
        self.assertEqual(self.check(b"x" * (3 << 20)).reason, "malformed")

    def test_encrypted_body_that_does_not_decrypt(self) -> None:
        for enc in ["not base64 !", base64.b64encode(b"0" * 32).decode(), base64.b64encode(b"short").decode(), ""]:
            with self.subTest(enc=enc):
                e = self.check(json.dumps({"enc": enc}).encode(), enc_key="k")
                self.assertEqual(e.reason, "malformed")

    def test_wrong_types_in_answers(self) -> None:
        fake = FakeKeywarden()
        c = Client.from_config(fake.config(), transport=fake)
        c.init()
        fake.handlers["license"] = lambda f, req, b: f.answer(req, 200, {"success": True, "level": True, "expires_at": "2027-01-01T00:00:00Z"})
        with self.assertRaises(KeywardenError) as cm:
            c.activate_license("KEY-GOOD-0001", "hwid-aaaaaaaa")
        self.assertEqual(cm.exception.reason, "malformed")
        fake.handlers["license"] = lambda f, req, b: f.answer(req, 200, {"success": True, "level": 2, "expires_at": "not a date"})
        self.assertIsNone(c.activate_license("KEY-GOOD-0001", "hwid-aaaaaaaa").expires_at)
        fake.handlers["login"] = lambda f, req, b: f.answer(req, 200, {"success": True, "user": {"username": "a", "level": "3"}})
        with self.assertRaises(KeywardenError):
            c.login("a", "b" * 8, "hwid-aaaaaaaa")


class FailingTransports(unittest.TestCase):
    def test_an_exception_from_a_custom_transport_is_network(self) -> None:
        calls: List[int] = []

        def boom(req: TransportRequest) -> TransportResponse:
            calls.append(1)
            raise RuntimeError("socket exploded")

        e = refused(Client.from_config(FakeKeywarden().config(), transport=boom, retries=3), self)
        self.assertEqual((e.code, e.not_sent), (ErrorCode.NETWORK, False))
        self.assertEqual(len(calls), 1, "may have reached the server: never sent twice")

    def test_not_sent_is_retried_with_the_same_body_then_typed(self) -> None:
        fake = FakeKeywarden()
        fake.before = lambda req, n: (_ for _ in ()).throw(not_sent())
        e = refused(Client.from_config(fake.config(), transport=fake, retries=2), self)
        self.assertEqual((e.code, e.not_sent), (ErrorCode.NETWORK, True))
        self.assertEqual(len(fake.requests), 3)
        self.assertEqual(len({r.body for r in fake.requests}), 1, "same body")
        self.assertEqual(len({r.headers["X-Nonce"] for r in fake.requests}), 3, "fresh nonce per attempt")

    def test_not_sent_then_success(self) -> None:
        fake = FakeKeywarden()

        def flaky(req: TransportRequest, n: int) -> None:
            if n == 1:
                raise not_sent()

        fake.before = flaky
        self.assertEqual(Client.from_config(fake.config(), transport=fake).init().name, "Fake App")

    def test_timeout_after_sending_is_not_retried(self) -> None:
        fake = FakeKeywarden()
        fake.before = lambda req, n: (_ for _ in ()).throw(TransportError("timeout", True, "no answer"))
        e = refused(Client.from_config(fake.config(), transport=fake, retries=2), self)
        self.assertEqual((e.code, e.not_sent, len(fake.requests)), (ErrorCode.TIMEOUT, False, 1))

    def test_a_transport_returning_garbage(self) -> None:
        e = refused(Client.from_config(FakeKeywarden().config(), transport=lambda req: None), self)  # type: ignore[arg-type,return-value]
        self.assertIs(e.code, ErrorCode.NETWORK)


class RawServer:
    """A TCP server on 127.0.0.1:0 whose connections are handled by `handle(sock)`."""

    def __init__(self, handle: Callable[[socket.socket], None]) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.handle = handle
        self.connections = 0
        self.closing = threading.Event()
        self.open: List[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closing.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            self.open.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self.handle(conn)
        except OSError:
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass

    def close(self) -> None:
        self.closing.set()
        self.sock.close()
        for c in self.open:
            try:
                c.close()
            except OSError:
                pass


def read_request(conn: socket.socket) -> tuple:
    """(request line, headers dict (original case), body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise OSError("closed")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    length = int(next((v for k, v in headers.items() if k.lower() == "content-length"), "0"))
    while len(body) < length:
        body += conn.recv(65536)
    return lines[0], headers, body


def http_fake(fake: FakeKeywarden, seen: Optional[List[str]] = None) -> Callable[[socket.socket], None]:
    """Serves FakeKeywarden over real HTTP (also as a forwarding proxy: absolute request URIs)."""

    def handle(conn: socket.socket) -> None:
        line, headers, body = read_request(conn)
        if seen is not None:
            seen.append(line)
        method, target, _ = line.split(" ")
        url = target if target.startswith("http") else "http://fake.invalid" + target
        res = fake(TransportRequest(method, url, headers, body, 5))
        out = f"HTTP/1.1 {res.status} X\r\nContent-Length: {len(res.body)}\r\nConnection: close\r\n"
        out += "".join(f"{k}: {v}\r\n" for k, v in res.headers.items())
        conn.sendall(out.encode("latin-1") + b"\r\n" + res.body)

    return handle


class DefaultTransportOverSockets(unittest.TestCase):
    def serve(self, handle: Callable[[socket.socket], None]) -> RawServer:
        s = RawServer(handle)
        self.addCleanup(s.close)
        return s

    def client(self, port: int, fake: Optional[FakeKeywarden] = None, **options: Any) -> Client:
        return Client.from_config((fake or FakeKeywarden()).config(base_url=f"http://127.0.0.1:{port}"), **options)

    def test_a_real_signed_exchange(self) -> None:
        fake = FakeKeywarden()
        s = self.serve(http_fake(fake))
        c = self.client(s.port, fake)
        self.assertEqual(c.init().name, "Fake App")
        self.assertEqual(c.activate_license("KEY-GOOD-0001", "hwid-aaaaaaaa").level, 3)

    def test_huge_body_is_a_network_error(self) -> None:
        def huge(conn: socket.socket) -> None:
            read_request(conn)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3000000\r\n\r\n")
            conn.sendall(b"x" * 3000000)

        def huge_chunked(conn: socket.socket) -> None:
            read_request(conn)
            conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in range(40):
                conn.sendall(b"10000\r\n" + b"y" * 0x10000 + b"\r\n")
            conn.sendall(b"0\r\n\r\n")

        for handler in (huge, huge_chunked):
            with self.subTest(handler.__name__):
                s = self.serve(handler)
                e = refused(self.client(s.port, retries=2), self)
                self.assertEqual((e.code, e.not_sent, s.connections), (ErrorCode.NETWORK, False, 1))
                self.assertIn("larger than", e.message)

    def test_a_hung_server_is_a_timeout_at_the_deadline(self) -> None:
        release = threading.Event()
        self.addCleanup(release.set)

        def hang(conn: socket.socket) -> None:
            read_request(conn)
            release.wait(30)

        s = self.serve(hang)
        t0 = time.monotonic()
        e = refused(self.client(s.port, timeout=0.5, retries=2), self)
        elapsed = time.monotonic() - t0
        self.assertEqual((e.code, e.not_sent), (ErrorCode.TIMEOUT, False))
        self.assertLess(elapsed, 2.0)
        self.assertEqual(s.connections, 1, "reached the server: not sent again")

    def test_a_trickling_server_cannot_stretch_the_deadline(self) -> None:
        stop = threading.Event()
        self.addCleanup(stop.set)

        def trickle(conn: socket.socket) -> None:
            read_request(conn)
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            while not stop.wait(0.05):
                conn.sendall(b"X-Slow: y\r\n")

        s = self.serve(trickle)
        t0 = time.monotonic()
        e = refused(self.client(s.port, timeout=0.6), self)
        self.assertIn(e.code, (ErrorCode.TIMEOUT, ErrorCode.NETWORK))  # network when http.client's 100-header cap hits first
        self.assertLess(time.monotonic() - t0, 2.5)

    def test_a_closed_port_is_network_not_sent_and_retried(self) -> None:
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        attempts: List[int] = []
        inner = DefaultTransport()

        def counting(req: TransportRequest) -> TransportResponse:
            attempts.append(1)
            return inner(req)

        e = refused(self.client(port, transport=counting, retries=2), self)
        self.assertEqual((e.code, e.not_sent, len(attempts)), (ErrorCode.NETWORK, True, 3))

    def test_an_unresolvable_host_is_network_not_sent(self) -> None:
        c = Client.from_config(FakeKeywarden().config(base_url="http://no-such-host.invalid"), retries=0, timeout=5)
        e = refused(c, self)
        self.assertIn(e.code, (ErrorCode.NETWORK, ErrorCode.TIMEOUT))  # timeout: a resolver that never answers
        self.assertTrue(e.not_sent)

    def test_garbage_and_dropped_connections(self) -> None:
        def garbage(conn: socket.socket) -> None:
            read_request(conn)
            conn.sendall(b"SSH-2.0-OpenSSH\r\n\r\n")

        def drop(conn: socket.socket) -> None:
            read_request(conn)

        def unsigned(conn: socket.socket) -> None:
            read_request(conn)
            body = b'{"success":true,"session":"s","app":{"name":"Evil"}}'
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

        for handler, code in ((garbage, ErrorCode.NETWORK), (drop, ErrorCode.NETWORK), (unsigned, ErrorCode.VERIFICATION)):
            with self.subTest(handler.__name__):
                s = self.serve(handler)
                e = refused(self.client(s.port, retries=2), self)
                self.assertIs(e.code, code)
                self.assertEqual(s.connections, 1)

    def test_plain_http_through_a_proxy_uses_the_absolute_uri(self) -> None:
        fake = FakeKeywarden()
        seen: List[str] = []
        proxy = self.serve(http_fake(fake, seen))
        c = Client.from_config(fake.config(base_url="http://kw.example:8080"), proxy=f"http://user:pa%40ss@127.0.0.1:{proxy.port}")
        self.assertEqual(c.init().name, "Fake App")
        self.assertEqual(seen, ["POST http://kw.example:8080/api/client/init HTTP/1.1"])
        auth = fake.requests[0].headers["Proxy-Authorization"]
        self.assertEqual(base64.b64decode(auth.split(" ")[1]), b"user:pa@ss")

    def test_a_proxy_refusing_the_tunnel_is_not_sent(self) -> None:
        lines: List[str] = []

        def refuse(conn: socket.socket) -> None:
            line, _, _ = read_request(conn)
            lines.append(line)
            conn.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")

        proxy = self.serve(refuse)
        c = Client.from_config(FakeKeywarden().config(base_url="https://kw.example"), proxy=f"http://127.0.0.1:{proxy.port}", retries=1)
        e = refused(c, self)
        self.assertEqual((e.code, e.not_sent), (ErrorCode.NETWORK, True))
        self.assertEqual([ln.rsplit(" ", 1)[0] for ln in lines], ["CONNECT kw.example:443"] * 2, "nothing reached the server, so it was tried again")


if __name__ == "__main__":
    unittest.main()
