"""The heartbeat thread against FakeKeywarden: proofs, retries of unsent beats with the same
index and token, degraded/reauth after a lost answer, kills, stop, and listener safety."""
from __future__ import annotations

import threading
import unittest
from typing import Any, Dict, List

import _support
from _support import Collector, FakeKeywarden, not_sent
from keywarden import BeatEvent, Client, ConfigError, ErrorCode, KeywardenError, TransportError

SYSTEM = "system-id-0001"
CODE = "abcdef0123456789"


def activated(fake: FakeKeywarden, **options: Any) -> Client:
    c = Client.from_config(fake.config(), transport=fake, **options)
    c.init()
    c.activate_license("KEY-GOOD-0001", "hwid-aaaaaaaa")
    return c


def beats(fake: FakeKeywarden) -> List[Dict[str, Any]]:
    return [b for b, r in zip(fake.bodies, fake.requests) if r.url.endswith("/api/client/heartbeat")]


class Beating(unittest.TestCase):
    def test_three_verified_beats_then_stop_closes_with_the_newest_token(self) -> None:
        fake = FakeKeywarden()
        c = activated(fake)
        got, stopped = Collector(), Collector()
        hb = c.start_heartbeat(SYSTEM, CODE, interval=0.01, debugger_detected=lambda: False, on_beat=got, on_stopped=stopped)
        self.assertEqual(hb.beat_interval, 5)
        self.assertEqual(got.wait_for(3), [BeatEvent(1, 1), BeatEvent(2, 2), BeatEvent(3, 3)])
        hb.stop()
        self.assertEqual(stopped.wait_for(1)[0].reason, "stop")
        self.assertFalse(hb.running)
        self.assertTrue(hb.wait(0))
        self.assertEqual(len(fake.stopped), 1, "heartbeat/stop accepted: it carried the current token")
        sent = beats(fake)
        self.assertEqual([b["beat_index"] for b in sent], list(range(1, len(sent) + 1)))
        self.assertTrue(all(b["code_hash"] == CODE and b["system_id"] == SYSTEM and b["debugger_detected"] is False for b in sent))
        hb.stop()  # twice is harmless
        self.assertEqual(len(stopped.items), 1)

    def test_defaults_system_id_and_code_hash(self) -> None:
        fake = FakeKeywarden()
        c = activated(fake)
        got = Collector()
        hb = c.start_heartbeat(interval=0.01, debugger_detected=lambda: False, on_beat=got)
        got.wait_for(1)
        hb.stop()
        b = beats(fake)[0]
        self.assertEqual(b["system_id"], c.machine_hwid())
        self.assertRegex(b["code_hash"], r"^[0-9a-f]{64}$")

    def test_a_bad_start_proof_means_no_heartbeat(self) -> None:
        fake = FakeKeywarden()
        c = activated(fake)
        fake.handlers["heartbeat/start"] = lambda f, req, body: f.answer(req, 200, {"success": True, "token": "TT" + "0" * 32, "beat_interval": 5, "proof": "AAAA"})
        with self.assertRaises(KeywardenError) as cm:
            c.start_heartbeat(SYSTEM, CODE)
        self.assertEqual((cm.exception.code, cm.exception.reason), (ErrorCode.VERIFICATION, "bad_proof"))

    def test_a_bad_beat_proof_is_not_trusted(self) -> None:
        fake = FakeKeywarden()
        c = activated(fake)
        real = FakeKeywarden._heartbeat

        def forged(f: FakeKeywarden, req: Any, body: Dict[str, Any]) -> Any:
            real(f, req, body)  # the server moved on ...
            return f.answer(req, 200, {"success": True, "new_token": "TT" + "e" * 32, "beat_count": 1, "proof": "bm9wZQ=="})

        fake.handlers["heartbeat"] = forged
        got, degraded = Collector(), Collector()
        hb = c.start_heartbeat(SYSTEM, CODE, interval=0.01, debugger_detected=lambda: False, on_beat=got, on_degraded=degraded)
        d = degraded.wait_for(1)[0]
        hb.stop()
        self.assertEqual((d.error.code, d.error.reason, d.lost), (ErrorCode.VERIFICATION, "bad_proof", True))
        self.assertEqual(got.items, [], "no beat was believed")
        tokens = {b["token"] for b in beats(fake)}
        self.assertNotIn("TT" + "e" * 32, tokens, "the unproven token was never used")

    def test_a_debugger_report_kills(self) -> None:
        fake = FakeKeywarden()
        c = activated(fake)
        killed, stopped = Collector(), Collector()
        hb = c.start_heartbeat(SYSTEM, CODE, interval=0.01, debugger_detected=lambda: True, reauth=True, on_killed=killed, on_stopped=stopped)
        k = killed.wait_for(1)[0]
        self.assertEqual((k.error.code, k.error.status, k.error.detail), (ErrorCode.HEARTBEAT_KILLED, 403, "rejected"))
        self.assertEqual(stopped.wait_for(1)[0].reason, "killed")
        self.assertTrue(hb.wait(5))
        self.assertFalse(hb.running)
        self.assertEqual(len(beats(fake)), 1, "killed is final: no reauth, no more beats")


class Robustness(unittest.TestCase):
    def test_an_unsent_beat_is_retried_with_the_same_index_and_token(self) -> None:
        fake = FakeKeywarden()
        c = activated(fake, retries=2)
        fails = {"n": 0}

        def before(req: Any, n: int) -> None:
            if req.url.endswith("/heartbeat") and fails["n"] < 2 and len(beats(fake)) >= 2:
                fails["n"] += 1
                raise not_sent()

        fake.before = before
        got, degraded = Collector(), Collector()
        hb = c.start_heartbeat(SYSTEM, CODE, interval=0.01, debugger_detected=lambda: False, on_beat=got, on_degraded=degraded)
        self.assertEqual([b.index for b in got.wait_for(3)], [1, 2, 3])
        hb.stop()
        self.assertEqual(degraded.items, [])
        sent = beats(fake)
        # beat 2 was attempted three times with one index and one token
        second = [b for b in sent if b["beat_index"] == 2]
        self.assertEqual(len(second), 3)
        self.assertEqual(len({b["token"] for b in second}), 1)

    def test_retries_exhausted_degrades_without_losing_state(self) -> None:
        fake = FakeKeywarden()
        c = activated(fake, retries=0)
        state = {"failed": False}

        def before(req: Any, n: int) -> None:
            if req.url.endswith("/heartbeat") and not state["failed"] and len(beats(fake)) >= 2:
                state["failed"] = True
                raise not_sent()

        fake.before = before
        got, degraded = Collector(), Collector()
        hb = c.start_heartbeat(SYSTEM, CODE, interval=0.01, debugger_detected=lambda: False, on_beat=got, on_degraded=degraded)
        self.assertEqual([b.index for b in got.wait_for(3)], [1, 2, 3])
        hb.stop()
        d = degraded.wait_for(1)[0]
        self.assertEqual((d.lost, d.reauthenticating, d.error.code, d.error.not_sent), (False, False, ErrorCode.NETWORK, True))

    def test_a_lost_answer_with_reauth_recovers_by_itself(self) -> None:
        fake = FakeKeywarden()
        c = activated(fake)
        first_session = c.session
        state = {"lost": False}

        def after(req: Any, res: Any) -> Any:
            if req.url.endswith("/heartbeat") and not state["lost"] and len(beats(fake)) == 2:
                state["lost"] = True
                raise TransportError("network", True, "connection reset after the server answered")
            return res

        fake.after = after
        got, degraded, recovered = Collector(), Collector(), Collector()
        hb = c.start_heartbeat(SYSTEM, CODE, interval=0.01, debugger_detected=lambda: False, reauth=True,
                               on_beat=got, on_degraded=degraded, on_recovered=recovered)
        counts = [b.count for b in got.wait_for(3)]
        hb.stop()
        d = degraded.wait_for(1)[0]
        self.assertEqual((d.lost, d.reauthenticating), (True, True))
        self.assertNotEqual(recovered.wait_for(1)[0].session, first_session)
        self.assertEqual(counts, [1, 1, 2], "the new heartbeat session counts from 1 again")
        paths = fake.paths()
        lost_at = [i for i, p in enumerate(paths) if p == "heartbeat"][1]
        self.assertEqual(paths[lost_at + 1:lost_at + 4], ["init", "license", "heartbeat/start"], "the same activation, repeated")
        self.assertEqual(fake.bodies[lost_at + 2]["license"], "KEY-GOOD-0001")

    def test_a_custom_reauth_callback_is_used(self) -> None:
        fake = FakeKeywarden()
        c = activated(fake)
        calls: List[Client] = []

        def reauth(client: Client) -> None:
            calls.append(client)
            client.init()
            client.activate_license("KEY-GOOD-0002", "hwid-cccccccc")

        def after(req: Any, res: Any) -> Any:
            if req.url.endswith("/heartbeat") and not calls and len(beats(fake)) == 1:
                raise TransportError("timeout", True, "no answer")
            return res

        fake.after = after
        recovered = Collector()
        hb = c.start_heartbeat(SYSTEM, CODE, interval=0.01, debugger_detected=lambda: False, reauth=reauth, on_recovered=recovered)
        recovered.wait_for(1)
        hb.stop()
        self.assertEqual(calls, [c])
        self.assertIn("KEY-GOOD-0002", [b.get("license") for b in fake.bodies])

    def test_without_reauth_a_lost_answer_ends_in_a_kill(self) -> None:
        fake = FakeKeywarden()
        c = activated(fake)

        def after(req: Any, res: Any) -> Any:
            if req.url.endswith("/heartbeat") and len(beats(fake)) == 2:
                raise TransportError("network", True, "reset")
            return res

        fake.after = after
        degraded, killed = Collector(), Collector()
        c.start_heartbeat(SYSTEM, CODE, interval=0.01, debugger_detected=lambda: False, on_degraded=degraded, on_killed=killed)
        self.assertTrue(degraded.wait_for(1)[0].lost)
        self.assertIs(killed.wait_for(1)[0].error.code, ErrorCode.HEARTBEAT_KILLED)
        self.assertEqual([b["beat_index"] for b in beats(fake)], [1, 2, 3], "index 2 never sent twice")


class ListenerSafety(unittest.TestCase):
    def test_a_raising_listener_does_not_stop_the_loop(self) -> None:
        fake = FakeKeywarden()
        c = activated(fake)
        got = Collector()

        def bad(_: Any) -> None:
            raise ValueError("listener bug")

        hb = c.start_heartbeat(SYSTEM, CODE, interval=0.01, debugger_detected=lambda: False, on_beat=bad)
        hb.on("beat", got)
        got.wait_for(2)
        hb.stop()

    def test_stop_from_inside_a_listener_does_not_deadlock(self) -> None:
        fake = FakeKeywarden()
        c = activated(fake)
        done = threading.Event()
        holder: Dict[str, Any] = {}

        def on_beat(b: BeatEvent) -> None:
            if b.count == 2:
                holder["hb"].stop()
                done.set()

        hb = c.prepare_heartbeat(SYSTEM, CODE, interval=0.01, debugger_detected=lambda: False)
        holder["hb"] = hb
        hb.on("beat", on_beat)
        hb.start()
        self.assertTrue(done.wait(5))
        self.assertTrue(hb.wait(5))
        self.assertEqual(len(fake.stopped), 1)

    def test_unknown_event_names_are_refused(self) -> None:
        fake = FakeKeywarden()
        hb = activated(fake).prepare_heartbeat(SYSTEM, CODE)
        with self.assertRaises(ValueError):
            hb.on("beats", lambda e: None)
        remove = hb.on("beat", lambda e: None)
        remove()
        with self.assertRaises(ConfigError):
            activated(FakeKeywarden()).prepare_heartbeat(SYSTEM, CODE, interval=0)


if __name__ == "__main__":
    unittest.main()
