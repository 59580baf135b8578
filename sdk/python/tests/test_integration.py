"""Integration tests against a real Keywarden server prepared by test/helpers/sdk-harness.ts
(run by test/sdk/python.test.ts). They run only when KW_BASE_URL is set; with
KW_REQUIRE_INTEGRATION=1 a missing server is a failure instead of a skip.

Direct calls come from 127.0.0.1 and share its budgets (init 30/min; register, login, license
20/min each), so every test here spends few calls; the hammering tests use their own client
addresses through X-Forwarded-For (the harness trusts 127.0.0.1 as a proxy).
"""
from __future__ import annotations

import json
import os
import secrets
import sys
import time
import unittest
import urllib.request
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional

import _support
from _support import Collector
from keywarden import (
    AsyncClient, BeatEvent, Client, DefaultTransport, ErrorCode, KeywardenError, TransportError, TransportRequest,
    TransportResponse,
)
from keywarden.crypto import beat_proof, start_proof

ENV = os.environ
BASE = ENV.get("KW_BASE_URL")
HWID_A = "sdk-py-hwid-aaaaaaaa"
HWID_B = "sdk-py-hwid-bbbbbbbb"
CODE = "abcdef0123456789"
_ran: List[str] = []
_keys: Dict[str, List[str]] = {}


def setUpModule() -> None:
    if not BASE:
        if ENV.get("KW_REQUIRE_INTEGRATION") == "1":
            raise RuntimeError("KW_REQUIRE_INTEGRATION=1 but KW_BASE_URL is not set")
        raise unittest.SkipTest("integration tests need a server: set KW_BASE_URL (test/sdk/python.test.ts does)")
    for label in ("PLAIN", "SIGNED"):
        _keys[label] = ENV[f"KW_KEYS_{label}"].split(",")


def tearDownModule() -> None:
    # test/sdk/python.test.ts reads this line to prove the integration tests really ran.
    print(f"\nintegration tests run: {len(_ran)}", file=sys.stderr, flush=True)


def key(label: str = "PLAIN") -> str:
    return _keys[label].pop(0)  # the vitest's example runs take keys from the end


def plain(**options: Any) -> Client:
    return Client.from_config(ENV["KW_CONFIG_PLAIN"], **options)


def signed(**options: Any) -> Client:
    return Client.from_config(ENV["KW_CONFIG_SIGNED"], **options)


def tamper(mode: str) -> str:
    return json.loads(ENV["KW_TAMPER_URLS"])[mode]


def app_id(label: str) -> str:
    return json.loads(ENV["KW_APP_IDS"])[label]


def owner_get(path: str) -> Any:
    req = urllib.request.Request(f"{BASE}{path}", headers={"Authorization": f"Bearer {ENV['KW_OWNER_TOKEN']}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def from_address(ip: str, inner: Optional[Callable[[TransportRequest], TransportResponse]] = None) -> Callable[[TransportRequest], TransportResponse]:
    """A transport whose calls the server attributes to `ip` (X-Forwarded-For from a trusted proxy)."""
    real = inner or DefaultTransport()
    return lambda req: real(TransportRequest(req.method, req.url, {**req.headers, "X-Forwarded-For": ip}, req.body, req.timeout))


class Recorder:
    """The default transport, keeping every (request, response) pair."""

    def __init__(self, inner: Optional[Callable[[TransportRequest], TransportResponse]] = None) -> None:
        self.real = inner or DefaultTransport()
        self.pairs: List[tuple] = []

    def __call__(self, req: TransportRequest) -> TransportResponse:
        res = self.real(req)
        self.pairs.append((req, res))
        return res


def random_ip() -> str:
    return f"10.{secrets.randbelow(250) + 1}.{secrets.randbelow(250) + 1}.{secrets.randbelow(250) + 1}"


class Integration(unittest.TestCase):
    def setUp(self) -> None:
        _ran.append(self.id())

    def fails(self, fn: Callable[[], Any]) -> KeywardenError:
        with self.assertRaises(KeywardenError) as cm:
            fn()
        return cm.exception

    # --- the client surface ----------------------------------------------------------------------
    def test_init(self) -> None:
        c = plain()
        app = c.init()
        self.assertEqual((app.name, app.version, app.hwid_lock), ("SDK PLAIN", "1.0", True))
        self.assertRegex(app.session, r"^[A-Za-z0-9_-]{43}$")
        self.assertLess(abs(c.clock_offset or 0), 5)

    def test_register_then_login(self) -> None:
        name = f"py-{secrets.token_hex(4)}"
        c = plain()
        c.init()
        u = c.register(name, "py-pass-123", key(), HWID_A)
        self.assertEqual((u.username, u.level), (name, 3))
        self.assertIsInstance(u.expires_at, datetime)
        users = owner_get(f"/api/apps/{app_id('PLAIN')}/users")
        self.assertTrue(next(x for x in users if x["username"] == name)["last_login"], "register logged in at once")
        e = self.fails(lambda: c.login(name, "wrong-pass", HWID_A))
        self.assertEqual((e.code, e.status), (ErrorCode.INVALID_KEY, 401))
        again = plain()
        again.init()
        self.assertEqual(again.login(name, "py-pass-123", HWID_A).level, 3)
        e = self.fails(lambda: again.register(f"{name}-2", "py-pass-123", "NOT-A-KEY", HWID_A))
        self.assertEqual((e.code, e.status), (ErrorCode.INVALID_KEY, 400))

    def test_license_with_hwid_lock(self) -> None:
        k = key()
        c = plain()
        c.init()
        lic = c.activate_license(k, HWID_A)
        self.assertEqual(lic.level, 3)
        assert lic.expires_at is not None
        self.assertIs(lic.expires_at.tzinfo, timezone.utc)
        days = (lic.expires_at - datetime.now(timezone.utc)).total_seconds() / 86400
        self.assertTrue(29 < days <= 30.01, days)
        other = plain()
        other.init()
        e = self.fails(lambda: other.activate_license(k, HWID_B))
        self.assertEqual((e.code, e.status, e.detail), (ErrorCode.HWID_MISMATCH, 403, "HWID mismatch. Key locked to another device."))
        self.assertEqual(c.activate_license(k, HWID_A).level, 3, "the bound device still activates")
        self.assertIs(self.fails(lambda: other.activate_license(k[:-1] + ("B" if k.endswith("A") else "A"), HWID_B)).code, ErrorCode.INVALID_KEY)

    def test_heartbeat_three_beats_with_proofs_then_stop(self) -> None:
        rec = Recorder()
        c = plain(transport=rec)
        c.init()
        c.activate_license(key(), HWID_A)
        got, stopped = Collector(), Collector()
        hb = c.start_heartbeat("sdk-py-system-01", CODE, interval=0.05, debugger_detected=lambda: False, on_beat=got, on_stopped=stopped)
        self.assertEqual(hb.beat_interval, 5)
        self.assertEqual(got.wait_for(3), [BeatEvent(1, 1), BeatEvent(2, 2), BeatEvent(3, 3)])
        hb.stop()
        self.assertEqual(stopped.wait_for(1)[0].reason, "stop")
        # the proofs the server sent are the ones docs/protocol.md 6 defines (checked here independently)
        token = None
        checked = 0
        for req, res in rec.pairs:
            body, answer = json.loads(req.body), json.loads(res.body)
            if req.url.endswith("/heartbeat/start"):
                token = answer["token"]
                self.assertEqual(answer["proof"], start_proof(c.session or "", "sdk-py-system-01", token))
            elif req.url.endswith("/heartbeat") and token and body["beat_index"] <= 3:
                self.assertEqual(body["token"], token)
                self.assertEqual(answer["proof"], beat_proof(token, c.session or "", body["beat_index"], answer["new_token"], answer["beat_count"]))
                token = answer["new_token"]
                checked += 1
        self.assertEqual(checked, 3)
        last = rec.pairs[-1]
        self.assertTrue(last[0].url.endswith("/heartbeat/stop"))
        self.assertEqual(last[1].status, 200, "stop was accepted with the newest token")
        # the session is gone on the server: a beat with its last token is refused
        e = self.fails(lambda: c.call("heartbeat", {"session": c.session, "token": hb._token, "system_id": "sdk-py-system-01", "beat_index": 99, "code_hash": CODE}))
        self.assertIs(e.code, ErrorCode.HEARTBEAT_KILLED)

    def test_a_debugger_report_kills_the_heartbeat(self) -> None:
        c = plain()
        c.init()
        c.activate_license(key(), HWID_A)
        killed, stopped = Collector(), Collector()
        hb = c.start_heartbeat("sdk-py-system-02", CODE, interval=0.05, debugger_detected=lambda: True, reauth=True, on_killed=killed, on_stopped=stopped)
        k = killed.wait_for(1)[0]
        self.assertEqual((k.error.code, k.error.status, k.error.detail), (ErrorCode.HEARTBEAT_KILLED, 403, "rejected"))
        self.assertEqual(stopped.wait_for(1)[0].reason, "killed")
        self.assertFalse(hb.running)

    def test_update_required(self) -> None:
        e = self.fails(lambda: Client.from_config(ENV["KW_CONFIG_OUTDATED"]).init())
        self.assertEqual((e.code, e.status, e.latest_version, e.update_url), (ErrorCode.UPDATE_REQUIRED, 426, "2.0", "https://example.com/download/2.0"))
        self.assertIn("Version 2.0 is out.", str(e))

    def test_rate_limited_answer_carries_retry_after(self) -> None:
        e = self.fails(lambda: plain(base_url=tamper("rate_limited")).init())
        self.assertEqual((e.code, e.status), (ErrorCode.RATE_LIMITED, 429))
        self.assertIsNotNone(e.retry_after)
        self.assertGreater(e.retry_after or 0, 0)

    def test_hammering_init_is_rate_limited(self) -> None:
        c = plain(transport=from_address(random_ip()))
        accepted = 0
        for _ in range(40):
            try:
                c.init()
                accepted += 1
            except KeywardenError as e:
                self.assertEqual((e.code, e.status), (ErrorCode.RATE_LIMITED, 429))
                self.assertGreater(e.retry_after or 0, 0)
                break
        else:
            self.fail("40 inits from one address were all accepted")
        self.assertEqual(accepted, 30, "docs/spec.md: 30 inits per minute per IP")

    def test_failed_logins_lock_out(self) -> None:
        c = plain(transport=from_address(random_ip()))
        c.init()
        name = f"py-lock-{secrets.token_hex(3)}"
        codes = []
        for _ in range(11):
            try:
                c.login(name, "wrong-pass-1", HWID_A)
            except KeywardenError as e:
                codes.append(e.code)
                if e.code is ErrorCode.LOCKED_OUT:
                    self.assertGreater(e.retry_after or 0, 0)
        self.assertEqual(codes, [ErrorCode.INVALID_KEY] * 10 + [ErrorCode.LOCKED_OUT])

    # --- signed requests, encryption, clocks -----------------------------------------------------
    def test_signed_app_with_encrypted_answers(self) -> None:
        rec = Recorder()
        c = signed(transport=rec, enc_key="sdk-py-enc")
        self.assertEqual(c.init().name, "SDK SIGNED")
        self.assertEqual(c.activate_license(key("SIGNED"), HWID_A).level, 3)
        self.assertEqual([list(json.loads(res.body)) for _, res in rec.pairs], [["enc"], ["enc"]])
        self.assertTrue(all("X-Signature" in req.headers and "X-Timestamp" in req.headers for req, _ in rec.pairs))
        with open(ENV["KW_CONFIG_SIGNED"], encoding="utf-8") as f:
            cfg = json.load(f)
        del cfg["api_secret"]
        e = self.fails(lambda: Client.from_config(cfg).init())
        self.assertEqual((e.code, e.status), (ErrorCode.CLOCK_SKEW, 401))

    def test_signed_requests_with_a_clock_eight_minutes_off(self) -> None:
        c = signed(clock=lambda: time.time() - 8 * 60)
        c.init()
        self.assertAlmostEqual(c.clock_offset or 0, 480, delta=3)
        self.assertEqual(c.activate_license(key("SIGNED"), HWID_A).level, 3)

    # --- tampered answers ------------------------------------------------------------------------
    def check_refused(self, mode: str, reasons: tuple) -> None:
        c = plain(base_url=tamper(mode), retries=0)
        e = self.fails(c.init)
        self.assertIs(e.code, ErrorCode.VERIFICATION)
        self.assertIn(e.reason, reasons)
        self.assertIsNone(c.session)

    def test_tamper_forged(self) -> None:
        self.check_refused("forged", ("bad_signature",))

    def test_tamper_unsigned(self) -> None:
        self.check_refused("unsigned", ("unsigned",))

    def test_tamper_replayed(self) -> None:
        # signed over another request's nonce; refused on its age first if it was recorded long ago
        self.check_refused("replayed", ("bad_signature", "stale"))

    def test_tamper_foreign_nonce(self) -> None:
        self.check_refused("foreign_nonce", ("bad_signature",))

    def test_tamper_unknown_kid(self) -> None:
        self.check_refused("unknown_kid", ("unknown_kid",))

    def test_tamper_stale(self) -> None:
        self.check_refused("stale", ("stale",))

    def test_tamper_bad_base64(self) -> None:
        self.check_refused("bad_base64", ("bad_base64",))

    def test_tamper_bad_proof_start_token_not_trusted(self) -> None:
        c = plain(base_url=tamper("bad_proof"))
        c.init()
        c.activate_license(key(), HWID_A)
        e = self.fails(lambda: c.start_heartbeat("sdk-py-system-03", CODE))
        self.assertEqual((e.code, e.reason), (ErrorCode.VERIFICATION, "bad_proof"))

    def test_tamper_bad_proof_beat_token_not_trusted(self) -> None:
        real = from_address(random_ip())  # spares 127.0.0.1's budgets
        spoiler = tamper("bad_proof")

        def beats_through_bad_proof(req: TransportRequest) -> TransportResponse:
            if req.url.endswith("/api/client/heartbeat"):
                req = TransportRequest(req.method, spoiler + "/api/client/heartbeat", req.headers, req.body, req.timeout)
            return real(req)

        c = plain(transport=beats_through_bad_proof)
        c.init()
        c.activate_license(key(), HWID_A)
        got, degraded = Collector(), Collector()
        hb = c.start_heartbeat("sdk-py-system-04", CODE, interval=0.05, debugger_detected=lambda: False, on_beat=got, on_degraded=degraded)
        d = degraded.wait_for(1)[0]
        hb.stop()
        self.assertEqual((d.error.code, d.error.reason), (ErrorCode.VERIFICATION, "bad_proof"))
        self.assertEqual(got.items, [])

    # --- heartbeat robustness against the real server --------------------------------------------
    def test_unsent_beats_are_retried_with_the_same_index_and_token(self) -> None:
        probe = __import__("socket").socket()
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
        probe.close()
        real = Recorder(from_address(random_ip()))
        state = {"beats": 0}

        def refuse_some(req: TransportRequest) -> TransportResponse:
            if req.url.endswith("/api/client/heartbeat"):
                state["beats"] += 1
                if state["beats"] in (2, 3):  # a genuine ECONNREFUSED: nothing reached the server
                    return real(TransportRequest(req.method, f"http://127.0.0.1:{closed}/api/client/heartbeat", req.headers, req.body, req.timeout))
            return real(req)

        c = plain(transport=refuse_some, retries=2)
        c.init()
        c.activate_license(key(), HWID_A)
        got, degraded = Collector(), Collector()
        hb = c.start_heartbeat("sdk-py-system-05", CODE, interval=0.05, debugger_detected=lambda: False, on_beat=got, on_degraded=degraded)
        self.assertEqual([b.index for b in got.wait_for(3)], [1, 2, 3])
        hb.stop()
        self.assertEqual(degraded.items, [])
        second = [json.loads(q.body) for q, _ in real.pairs if q.url.endswith("/api/client/heartbeat") and json.loads(q.body)["beat_index"] == 2]
        self.assertEqual(len(second), 1, "reached the server once, after two refused connections")

    def test_a_lost_answer_reauthenticates_by_itself(self) -> None:
        real = from_address(random_ip())
        state = {"beats": 0}

        def lose_second(req: TransportRequest) -> TransportResponse:
            res = real(req)
            if req.url.endswith("/api/client/heartbeat"):
                state["beats"] += 1
                if state["beats"] == 2:
                    raise TransportError("network", True, "connection reset after the server answered")
            return res

        c = plain(transport=lose_second)
        c.init()
        c.activate_license(key(), HWID_A)
        first = c.session
        got, degraded, recovered = Collector(), Collector(), Collector()
        hb = c.start_heartbeat("sdk-py-system-06", CODE, interval=0.05, debugger_detected=lambda: False, reauth=True,
                               on_beat=got, on_degraded=degraded, on_recovered=recovered)
        counts = [b.count for b in got.wait_for(3)]
        hb.stop()
        self.assertEqual((degraded.wait_for(1)[0].lost, degraded.items[0].reauthenticating), (True, True))
        self.assertNotEqual(recovered.wait_for(1)[0].session, first)
        self.assertEqual(counts, [1, 1, 2])


    # --- what it cannot verify, and an outage -----------------------------------------------------
    def test_every_beat_tampered_is_compromised_after_5_without_endless_reauth(self) -> None:
        c = plain(base_url=tamper("bad_beat_proof"))
        c.init()
        c.activate_license(key(), HWID_A)
        degraded, compromised, recovered, killed = Collector(), Collector(), Collector(), Collector()
        hb = c.start_heartbeat("sdk-py-compromised", CODE, interval=0.05, debugger_detected=lambda: False, reauth=True,
                               on_degraded=degraded, on_compromised=compromised, on_recovered=recovered, on_killed=killed)
        started = hb.last_beat_at
        got = compromised.wait_for(1)[0]
        self.assertEqual((got.failures, got.error.code, got.error.reason, got.last_beat_at), (5, ErrorCode.VERIFICATION, "bad_proof", started))
        self.assertEqual([d.verification_failures for d in degraded.items[:5]], [1, 2, 3, 4, 5])
        self.assertEqual([d.reauthenticating for d in degraded.items[:5]], [True, True, True, True, False])
        self.assertTrue(all(d.last_beat_at == started for d in degraded.items[:5]))
        # No more re-authentication: the next beat carries the old token and the server refuses it.
        self.assertEqual(killed.wait_for(1)[0].error.code, ErrorCode.HEARTBEAT_KILLED)
        self.assertEqual(len(recovered.items), 4)
        self.assertEqual(hb.state, "killed")

    def test_an_outage_then_a_forgotten_session_reauthenticates_once(self) -> None:
        c = plain(base_url=ENV["KW_OUTAGE_URL"])
        c.init()
        c.activate_license(key(), HWID_A)
        got, degraded, recovered, killed = Collector(), Collector(), Collector(), Collector()
        hb = c.start_heartbeat("sdk-py-outage-01", CODE, interval=0.2, debugger_detected=lambda: False, reauth=True,
                               on_beat=got, on_degraded=degraded, on_recovered=recovered, on_killed=killed)
        got.wait_for(1)
        last = hb.last_beat_at
        outage(1500)
        self.assertEqual(got.wait_for(2)[1], BeatEvent(1, 1))  # the first beat of the new session
        hb.stop()
        self.assertEqual(len(recovered.items), 1)
        self.assertEqual(killed.items, [])
        first, final = degraded.items[0], degraded.items[-1]
        self.assertEqual((first.lost, first.error.code, first.error.not_sent, first.last_beat_at), (False, ErrorCode.NETWORK, True, last))
        self.assertEqual((final.lost, final.error.code, final.error.status), (True, ErrorCode.HEARTBEAT_KILLED, 403))

    def test_an_outage_during_which_the_key_was_banned_ends_with_banned(self) -> None:
        k = key()
        c = plain(base_url=ENV["KW_OUTAGE_URL"])
        c.init()
        c.activate_license(k, HWID_A)
        got, recovered, killed = Collector(), Collector(), Collector()
        hb = c.start_heartbeat("sdk-py-outage-02", CODE, interval=0.2, debugger_detected=lambda: False, reauth=True,
                               on_beat=got, on_recovered=recovered, on_killed=killed)
        got.wait_for(1)
        outage(1500, ban=k)
        e = killed.wait_for(1)[0].error
        self.assertEqual((e.code, e.status, e.detail), (ErrorCode.BANNED, 403, "License key is banned"))
        self.assertEqual(recovered.items, [])
        self.assertEqual(hb.state, "killed")


def outage(ms: int, ban: Optional[str] = None) -> None:
    """Connections to KW_OUTAGE_URL are refused for `ms`; meanwhile the server forgets the heartbeat
    sessions that went through it (and bans `ban`)."""
    body: Dict[str, Any] = {"ms": ms}
    if ban:
        body["ban"] = ban
    req = urllib.request.Request(ENV["KW_OUTAGE_URL"] + "/__outage", data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200

class AsyncIntegration(unittest.IsolatedAsyncioTestCase):
    def setUp(self) -> None:
        _ran.append(self.id())

    async def test_async_client_activates_and_beats(self) -> None:
        c = AsyncClient.from_config(ENV["KW_CONFIG_PLAIN"])
        self.assertEqual((await c.init()).name, "SDK PLAIN")
        self.assertEqual((await c.activate_license(key(), HWID_A)).level, 3)
        hb = await c.start_heartbeat("sdk-py-system-07", CODE, interval=0.05, debugger_detected=lambda: False)
        names = []
        async for name, event in hb.events():
            names.append(name)
            if name == "beat" and event.count == 2:
                await hb.stop()
        # a third beat may land while stop() waits for it; nothing but beats precedes "stopped"
        self.assertEqual(names[:2], ["beat", "beat"])
        self.assertEqual(names[-1], "stopped")
        self.assertEqual(set(names[:-1]), {"beat"})


if __name__ == "__main__":
    unittest.main()
