"""The grace period (docs/protocol.md 12.6) in a running heartbeat, against FakeKeywarden: the visible
``offline`` state while the service cannot be reached, ``grace_expired`` once it is over, and the
rules that only verified answers extend it and a verified refusal ends it."""
from __future__ import annotations

import threading
import time
import unittest
from typing import Any, Dict, List

import _support
from _support import Collector, FakeKeywarden, iso
from keywarden import Client, ErrorCode, ExpiredEvent, GraceExpiredEvent, OfflineEvent, TransportError

SYSTEM = "system-id-0001"
CODE = "abcdef0123456789"


class Clock:
    def __init__(self) -> None:
        self.shift = 0.0

    def __call__(self) -> float:
        return time.time() + self.shift


class Outage:
    """Makes every heartbeat call fail like a connection reset (sent: the answer is lost) while on."""

    def __init__(self, fake: FakeKeywarden) -> None:
        self.on = threading.Event()
        fake.before = self.before

    def before(self, req: Any, n: int) -> None:
        if self.on.is_set() and "/heartbeat" in req.url:
            raise TransportError("network", True, "connection reset")


def activated(fake: FakeKeywarden, **options: Any) -> Client:
    c = Client.from_config(fake.config(), transport=fake, **options)
    c.init()
    c.activate_license("KEY-GOOD-0001", "hwid-aaaaaaaa")
    return c


def start(c: Client, **listeners: Any) -> Any:
    return c.start_heartbeat(SYSTEM, CODE, interval=0.01, debugger_detected=lambda: False, **listeners)


class OfflineState(unittest.TestCase):
    def test_unreachable_within_the_grace_is_offline_until_a_beat_verifies(self) -> None:
        fake = FakeKeywarden()
        fake.grace_seconds = 3600
        outage = Outage(fake)
        c = activated(fake)
        offline, beats, degraded = Collector(), Collector(), Collector()
        hb = start(c, on_offline=offline, on_beat=beats, on_degraded=degraded)
        beats.wait_for(1)
        outage.on.set()
        ev = offline.wait_for(1)[0]
        self.assertIsInstance(ev, OfflineEvent)
        self.assertEqual(ev.error.code, ErrorCode.NETWORK)
        self.assertAlmostEqual(ev.grace_until.timestamp(), time.time() + 3600, delta=10)
        self.assertEqual(hb.state, "offline")
        self.assertTrue(c.grace_active())
        degraded.wait_for(3)  # every failed beat is still reported
        self.assertEqual(len(offline.items), 1, "offline is told once per outage")
        n = len(beats.items)
        outage.on.clear()
        beats.wait_for(n + 1)
        self.assertEqual(hb.state, "healthy")
        hb.stop()

    def test_the_grace_runs_out_while_unreachable(self) -> None:
        fake = FakeKeywarden()
        fake.grace_seconds = 60
        outage = Outage(fake)
        clock = Clock()
        c = activated(fake, clock=clock)
        offline, expired = Collector(), Collector()
        hb = start(c, on_offline=offline, on_grace_expired=expired)
        outage.on.set()
        offline.wait_for(1)
        clock.shift = 120
        ev = expired.wait_for(1)[0]
        self.assertIsInstance(ev, GraceExpiredEvent)
        self.assertEqual(ev.grace_until, c.grace_until)
        self.assertEqual(ev.error.code, ErrorCode.NETWORK)
        self.assertFalse(c.grace_active())
        self.assertEqual(hb.state, "degraded")
        time.sleep(0.1)  # more failing ticks: told once
        self.assertEqual(len(expired.items), 1)
        hb.stop()

    def test_offline_ends_the_moment_the_grace_does_before_any_beat_fails(self) -> None:
        fake = FakeKeywarden()
        fake.grace_seconds = 60
        outage = Outage(fake)
        clock = Clock()
        c = activated(fake, clock=clock)
        seen: List[str] = []
        hb_box: List[Any] = []

        def on_offline(_: Any) -> None:
            # On the heartbeat thread, inside the failed beat: no other beat can run meanwhile.
            hb = hb_box[0]
            seen.append(hb.state)
            clock.shift = 61
            seen.append(hb.state)

        offline = Collector()
        hb = c.prepare_heartbeat(SYSTEM, CODE, interval=0.01, debugger_detected=lambda: False)
        hb_box.append(hb)
        hb.on("offline", on_offline)
        hb.on("offline", offline)
        hb.start()
        outage.on.set()
        offline.wait_for(1)
        self.assertEqual(seen, ["offline", "degraded"])
        self.assertFalse(c.grace_active())
        hb.stop()

    def test_unreachable_without_grace_is_only_degraded(self) -> None:
        fake = FakeKeywarden()
        outage = Outage(fake)
        c = activated(fake)
        offline, degraded = Collector(), Collector()
        hb = start(c, on_offline=offline, on_degraded=degraded)
        outage.on.set()
        degraded.wait_for(3)
        self.assertEqual(hb.state, "degraded")
        self.assertEqual(offline.items, [])
        hb.stop()

    def test_an_unsigned_gateway_502_counts_as_unreachable(self) -> None:
        fake = FakeKeywarden()
        fake.grace_seconds = 600
        c = activated(fake)
        gateway = {"on": False}
        fake.after = lambda req, res: (
            _support.TransportResponse(status=502, headers={}, body=b"Bad Gateway") if gateway["on"] and "/heartbeat" in req.url else res
        )
        offline = Collector()
        hb = start(c, on_offline=offline)
        gateway["on"] = True
        ev = offline.wait_for(1)[0]
        self.assertEqual((ev.error.code, ev.error.status), (ErrorCode.SERVER, 502))
        self.assertEqual(hb.state, "offline")
        hb.stop()


class OnlyVerifiedAnswersCount(unittest.TestCase):
    def test_verified_beats_extend_the_grace(self) -> None:
        fake = FakeKeywarden()
        fake.grace_seconds = 60
        c = activated(fake)
        first = c.grace_until
        fake.grace_seconds = 7200
        beats = Collector()
        hb = start(c, on_beat=beats)
        beats.wait_for(2)
        hb.stop()
        assert first is not None and c.grace_until is not None
        self.assertGreater(c.grace_until.timestamp(), first.timestamp() + 3600)

    def test_a_beat_whose_proof_fails_extends_nothing(self) -> None:
        fake = FakeKeywarden()
        fake.grace_seconds = 60
        c = activated(fake)

        def forged(f: FakeKeywarden, req: Any, body: Dict[str, Any]) -> Any:
            # Correctly signed, carrying a month of grace, but its proof is wrong.
            return f.ok(req, body, f.granted({"new_token": "TT" + "e" * 32, "beat_count": 1, "proof": "bm9wZQ=="}))

        fake.handlers["heartbeat"] = forged
        degraded = Collector()
        hb = start(c, on_degraded=degraded)
        started = c.grace_until
        fake.grace_seconds = 30 * 86400
        self.assertEqual(degraded.wait_for(2)[1].error.reason, "bad_proof")
        hb.stop()
        self.assertEqual(c.grace_until, started, "only verified answers move it")

    def test_a_verified_refusal_ends_the_grace_at_once(self) -> None:
        fake = FakeKeywarden()
        fake.grace_seconds = 3600
        c = activated(fake)
        beats, killed = Collector(), Collector()
        hb = start(c, on_beat=beats, on_killed=killed)
        beats.wait_for(1)
        self.assertTrue(c.grace_active())
        fake.heartbeats.clear()  # the server killed the session: the next beat is `rejected`
        k = killed.wait_for(1)[0]
        self.assertEqual(k.error.code, ErrorCode.HEARTBEAT_KILLED)
        self.assertIsNone(c.grace_until)
        self.assertFalse(c.grace_active())
        self.assertTrue(hb.wait(5))


class ExpiryWhileRunning(unittest.TestCase):
    """docs/protocol.md 12.8 over REST: the server ends the session at expires_at; the heartbeat reports it."""

    def running(self, fake: FakeKeywarden, in_seconds: float, interval: float) -> Any:
        fake.expires_at = iso(time.time() + in_seconds)
        c = activated(fake)
        self.assertEqual(c.expires_at.timestamp() if c.expires_at else None, _support.parse_iso(fake.expires_at))
        ev = {name: Collector() for name in ("beat", "expired", "killed", "revoked")}
        hb = c.start_heartbeat(SYSTEM, CODE, interval=interval, debugger_detected=lambda: False,
                               **{f"on_{k}": v for k, v in ev.items() if k != "revoked"})
        hb.on("revoked", ev["revoked"])
        return c, hb, ev

    def test_a_beat_refused_after_the_known_expiry_is_expired_on_time_with_no_grace(self) -> None:
        fake = FakeKeywarden()
        fake.grace_seconds = 3600
        fake.enforce_expiry = True
        # A beat a minute: only the beat just after the expiry can tell it within seconds.
        c, hb, ev = self.running(fake, 0.3, 60)
        e = ev["expired"].wait_for(1)[0]
        late = time.time() - _support.parse_iso(fake.expires_at)
        self.assertIsInstance(e, ExpiredEvent)
        self.assertEqual(e.expires_at, c.expires_at)
        self.assertGreaterEqual(late, 0)
        self.assertLess(late, 2.5)
        self.assertEqual(ev["killed"].wait_for(1)[0].error.code, ErrorCode.EXPIRED)
        self.assertTrue(hb.wait(5))
        self.assertEqual(hb.state, "expired")
        self.assertIsNone(c.grace_until)
        self.assertEqual(ev["beat"].items, [])
        self.assertEqual(ev["revoked"].items, [])

    def test_no_answer_after_the_known_expiry_is_expired_too(self) -> None:
        fake = FakeKeywarden()
        fake.grace_seconds = 3600
        outage = Outage(fake)
        c, hb, ev = self.running(fake, 0.3, 60)
        outage.on.set()
        self.assertEqual(ev["killed"].wait_for(1)[0].error.code, ErrorCode.EXPIRED)
        self.assertEqual(hb.state, "expired")
        self.assertFalse(c.grace_active())

    def test_a_refusal_long_before_the_known_expiry_is_a_plain_kill(self) -> None:
        fake = FakeKeywarden()
        c, hb, ev = self.running(fake, 3600, 0.02)
        ev["beat"].wait_for(1)
        fake.heartbeats.clear()
        self.assertEqual(ev["killed"].wait_for(1)[0].error.code, ErrorCode.HEARTBEAT_KILLED)
        self.assertEqual(hb.state, "killed")
        self.assertEqual(ev["expired"].items, [])

    def test_beats_accepted_well_after_the_known_expiry_go_on_and_forget_it(self) -> None:
        fake = FakeKeywarden()
        c, hb, ev = self.running(fake, 0.2, 0.4)
        deadline = time.time() + 10
        while c.expires_at is not None and time.time() < deadline:
            ev["beat"].wait_for(len(ev["beat"].items) + 1)
        self.assertIsNone(c.expires_at)
        self.assertGreaterEqual(time.time() - _support.parse_iso(fake.expires_at), 1.5)
        ev["beat"].wait_for(len(ev["beat"].items) + 1)
        self.assertEqual(hb.state, "healthy")
        self.assertEqual(ev["expired"].items, [])
        hb.stop()


if __name__ == "__main__":
    unittest.main()
