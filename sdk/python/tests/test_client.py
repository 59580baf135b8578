"""The client surface against FakeKeywarden (an in-process transport that answers and signs
like the server): request headers, signatures, clock offset, encryption, register-then-login,
dates and error mapping."""
from __future__ import annotations

import json
import re
import time
import unittest
from datetime import datetime, timezone
from typing import Any

import _support
from _support import SECRET, FakeKeywarden
from keywarden import Client, ErrorCode, KeywardenError
from keywarden.crypto import canonical_request, request_signature


def client(fake: FakeKeywarden, **options: Any) -> Client:
    return Client.from_config(fake.config(), transport=fake, **options)


class InitAndHeaders(unittest.TestCase):
    def test_init_returns_the_app_and_every_call_has_a_fresh_nonce(self) -> None:
        fake = FakeKeywarden()
        c = client(fake)
        app = c.init()
        self.assertEqual((app.name, app.version, app.hwid_lock), ("Fake App", "1.0", True))
        self.assertEqual(app.session, c.session)
        c.init()
        nonces = [r.headers["X-Nonce"] for r in fake.requests]
        self.assertEqual(len(set(nonces)), 2)
        for n in nonces:
            self.assertRegex(n, r"^[A-Za-z0-9_-]{16,64}$")
        self.assertEqual(fake.bodies[0], {"api_key": _support.API_KEY, "version": "1.0"})
        self.assertEqual(fake.requests[0].url, "http://fake.invalid/api/client/init")
        self.assertNotIn("X-Signature", fake.requests[0].headers, "no secret, no request signature")

    def test_calls_before_init_are_typed_errors(self) -> None:
        c = client(FakeKeywarden())
        with self.assertRaises(KeywardenError) as cm:
            c.activate_license("KEY-GOOD-0001")
        self.assertIs(cm.exception.code, ErrorCode.SESSION_EXPIRED)

    def test_odd_strings_are_sent_not_raised(self) -> None:
        fake = FakeKeywarden()
        c = client(fake)
        c.init()
        with self.assertRaises(KeywardenError):
            c.login("n\udcffme", "p\u00e4ss\u0000", "hwid-aaaaaaaa")  # a lone surrogate (surrogateescape'd argv)
        self.assertEqual(fake.bodies[-1]["username"], "n\udcffme")

    def test_binary_hash_and_token_are_sent(self) -> None:
        fake = FakeKeywarden()
        client(fake).init(binary_hash="ab" * 32, binary_token="tok", binary_token_hash="cd" * 32)
        self.assertEqual(fake.bodies[0]["binary_hash"], "ab" * 32)
        self.assertEqual((fake.bodies[0]["binary_token"], fake.bodies[0]["binary_token_hash"]), ("tok", "cd" * 32))


class SignedRequests(unittest.TestCase):
    def test_every_request_carries_a_valid_hmac(self) -> None:
        fake = FakeKeywarden(secret=SECRET)
        c = client(fake)
        c.init()
        c.activate_license("KEY-GOOD-0001", "hwid-aaaaaaaa")
        for r in fake.requests:
            path = "/api/client/" + r.url.split("/api/client/")[1]
            ts, n = r.headers["X-Timestamp"], r.headers["X-Nonce"]
            self.assertLessEqual(abs(int(ts) - time.time()), 2)
            self.assertEqual(r.headers["X-Signature"], request_signature(SECRET, canonical_request("POST", path, ts, n, r.body)))

    def test_a_wrong_secret_is_clock_skew_without_endless_retries(self) -> None:
        fake = FakeKeywarden(secret=SECRET)
        c = Client.from_config(fake.config(api_secret="wrong"), transport=fake)
        with self.assertRaises(KeywardenError) as cm:
            c.init()
        self.assertIs(cm.exception.code, ErrorCode.CLOCK_SKEW)
        self.assertEqual(cm.exception.status, 401)
        self.assertEqual(len(fake.requests), 1, "no offset was learned: nothing to retry")

    def test_a_clock_minutes_off_is_corrected_from_the_first_verified_answer(self) -> None:
        fake = FakeKeywarden(secret=SECRET)
        c = client(fake, clock=lambda: time.time() - 8 * 60)
        c.init()
        # first attempt refused (timestamp 8 min old), the signed refusal taught the offset, retried once
        self.assertEqual(len(fake.requests), 2)
        self.assertAlmostEqual(c.clock_offset or 0, 480, delta=2)
        c.activate_license("KEY-GOOD-0001", "hwid-aaaaaaaa")
        self.assertEqual(len(fake.requests), 3, "later calls sign with the server's time at once")

    def test_offset_then_window_applies(self) -> None:
        fake = FakeKeywarden(shift=500)
        c = client(fake)
        c.init()
        self.assertAlmostEqual(c.clock_offset or 0, 500, delta=2)
        fake.shift = 500 - 301  # now 301 s behind the learned server time
        with self.assertRaises(KeywardenError) as cm:
            c.init()
        self.assertEqual(cm.exception.reason, "stale")

    def test_first_answer_beyond_max_clock_offset_is_stale(self) -> None:
        fake = FakeKeywarden(shift=700)
        with self.assertRaises(KeywardenError) as cm:
            client(fake).init()
        self.assertEqual(cm.exception.reason, "stale")
        self.assertEqual(client(FakeKeywarden(shift=700), max_clock_offset=900).init().name, "Fake App")


class Encryption(unittest.TestCase):
    def test_enc_key_gets_encrypted_bodies_and_decrypts_them(self) -> None:
        fake = FakeKeywarden(secret=SECRET)
        wire = []
        inner = fake

        def spy(req):  # type: ignore[no-untyped-def]
            res = inner(req)
            wire.append(json.loads(res.body))
            return res

        c = Client.from_config(fake.config(), transport=spy, enc_key="client-enc")
        self.assertEqual(c.init().name, "Fake App")
        lic = c.activate_license("KEY-GOOD-0001", "hwid-aaaaaaaa")
        self.assertEqual(lic.level, 3)
        self.assertEqual([list(w) for w in wire], [["enc"], ["enc"]])
        ivs = [b["init_iv"] for b in fake.bodies]
        self.assertEqual(len(set(ivs)), 2, "a fresh init_iv per call")
        self.assertEqual(fake.bodies[0]["enc_key"], "client-enc")


class RouteHint(unittest.TestCase):
    def test_the_route_is_dropped_after_a_gateway_status_a_timeout_or_a_connection_error(self) -> None:
        """X-Keywarden-Route goes back on every call until an answer is 502/503/504 (signed or not)
        or the call fails on the way: then the next call carries none, so the balancer picks a live worker."""
        from keywarden import TransportError, TransportResponse

        fake = FakeKeywarden()

        def named(status: int, route: Any):  # type: ignore[no-untyped-def]
            def step(req):  # type: ignore[no-untyped-def]
                if status == 200:
                    res = fake(req)
                    res.headers["x-keywarden-route"] = route
                    return res
                return fake.fail(req, status, "x", headers={"x-keywarden-route": route} if route else {})
            return step

        def unsigned_502(req):  # type: ignore[no-untyped-def]
            return TransportResponse(status=502, headers={"content-type": "text/html"}, body=b"<html>502</html>")

        def raising(kind: str):  # type: ignore[no-untyped-def]
            def step(req):  # type: ignore[no-untyped-def]
                raise TransportError(kind, True, kind)
            return step

        steps = [
            named(200, "a-0"),  # init: the answer names the owner
            named(503, "a-0"),  # a signed 503: dropped, even though it names one
            named(401, "b-1"),
            unsigned_502,  # a balancer's own 502
            named(401, "b-1"),
            named(504, "b-1"),
            named(401, "b-0"),
            raising("timeout"),
            named(401, "b-1"),
            raising("network"),  # a connection reset after the request left
            named(401, "b-0"),
            named(401, None),
        ]
        sent = []

        def transport(req):  # type: ignore[no-untyped-def]
            sent.append(req.headers.get("X-Keywarden-Route"))
            return steps.pop(0)(req)

        c = Client.from_config(fake.config(), transport=transport, retries=0)
        c.init()
        while steps:
            with self.assertRaises(KeywardenError):
                c.call("/license", {"session": c.session, "license": "KEY-NONE", "hwid": "h"})
        self.assertEqual(sent, [None, "a-0", None, "b-1", None, "b-1", None, "b-0", None, "b-1", None, "b-0"])


class Activation(unittest.TestCase):
    def test_license_level_and_expiry_as_datetime(self) -> None:
        fake = FakeKeywarden()
        c = client(fake)
        c.init()
        lic = c.activate_license("KEY-GOOD-0001", "hwid-aaaaaaaa")
        self.assertEqual(lic.level, 3)
        self.assertEqual(lic.expires_at, datetime(2099, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc))
        self.assertEqual(lic.message, "License activated")

    def test_hwid_defaults_to_the_salted_machine_id(self) -> None:
        fake = FakeKeywarden()
        c = client(fake)
        c.init()
        c.activate_license("KEY-GOOD-0001")
        self.assertEqual(fake.bodies[-1]["hwid"], c.machine_hwid())
        self.assertRegex(c.machine_hwid(), r"^[0-9a-f]{64}$")

    def test_hwid_mismatch_and_invalid_key(self) -> None:
        fake = FakeKeywarden()
        c = client(fake)
        c.init()
        c.activate_license("KEY-GOOD-0001", "hwid-aaaaaaaa")
        with self.assertRaises(KeywardenError) as cm:
            c.activate_license("KEY-GOOD-0001", "hwid-bbbbbbbb")
        self.assertEqual((cm.exception.code, cm.exception.status), (ErrorCode.HWID_MISMATCH, 403))
        with self.assertRaises(KeywardenError) as cm:
            c.activate_license("NOPE", "hwid-aaaaaaaa")
        self.assertIs(cm.exception.code, ErrorCode.INVALID_KEY)

    def test_register_logs_in_at_once(self) -> None:
        fake = FakeKeywarden()
        c = client(fake)
        c.init()
        u = c.register("alice", "pass-1234", "KEY-GOOD-0001", "hwid-aaaaaaaa")
        self.assertEqual((u.username, u.level), ("alice", 3))
        self.assertEqual(fake.paths(), ["init", "register", "login"])
        self.assertEqual(fake.bodies[-1], {"session": c.session, "username": "alice", "password": "pass-1234", "hwid": "hwid-aaaaaaaa"})

    def test_register_ignores_the_failure_of_its_login(self) -> None:
        fake = FakeKeywarden()
        fake.handlers["login"] = lambda f, req, body: f.fail(req, 429, "Rate limit exceeded", headers={"retry-after": "30"})
        c = client(fake)
        c.init()
        self.assertEqual(c.register("bob", "pass-1234", "KEY-GOOD-0001", "hwid-aaaaaaaa").username, "bob")
        self.assertEqual(fake.paths(), ["init", "register", "login"])

    def test_login_failure_is_invalid_key(self) -> None:
        fake = FakeKeywarden()
        c = client(fake)
        c.init()
        with self.assertRaises(KeywardenError) as cm:
            c.login("nobody", "x" * 8, "hwid-aaaaaaaa")
        self.assertEqual((cm.exception.code, cm.exception.status, cm.exception.detail), (ErrorCode.INVALID_KEY, 401, "Invalid username or password"))
        self.assertNotIn("x" * 8, repr(c.last_activation) if c.last_activation else "")

    def test_update_required_and_rate_limited_fields(self) -> None:
        fake = FakeKeywarden()
        fake.handlers["init"] = lambda f, req, body: f.fail(req, 426, {"message": "Version 2.0 is out.", "latest_version": "2.0", "update_url": "https://e.example/2.0", "force_update": True})
        with self.assertRaises(KeywardenError) as cm:
            client(fake).init()
        e = cm.exception
        self.assertEqual((e.code, e.latest_version, e.update_url), (ErrorCode.UPDATE_REQUIRED, "2.0", "https://e.example/2.0"))
        fake.handlers["init"] = lambda f, req, body: f.fail(req, 429, "Rate limit exceeded", headers={"retry-after": "42"})
        with self.assertRaises(KeywardenError) as cm:
            client(fake).init()
        self.assertEqual((cm.exception.code, cm.exception.retry_after), (ErrorCode.RATE_LIMITED, 42))

    def test_a_disabled_message_is_app_disabled(self) -> None:
        fake = FakeKeywarden()
        fake.handlers["init"] = lambda f, req, body: f.fail(req, 403, "Closed for maintenance")
        with self.assertRaises(KeywardenError) as cm:
            client(fake).init()
        self.assertEqual((cm.exception.code, cm.exception.detail), (ErrorCode.APP_DISABLED, "Closed for maintenance"))


class Logging(unittest.TestCase):
    def test_logger_option_receives_records(self) -> None:
        records = []

        class L:
            def debug(self, msg, *a):  # type: ignore[no-untyped-def]
                records.append(("debug", msg % a))

            info = warning = error = debug

        fake = FakeKeywarden(shift=120)
        client(fake, logger=L()).init()
        self.assertTrue(any(re.match(r"keywarden\.clock\.offset", m) for _, m in records), records)


if __name__ == "__main__":
    unittest.main()
