"""docs/protocol.md 12 (licensing models) end to end against real servers prepared by test/helpers/sdk-harness.ts
and test/helpers/models-harness.ts: a trial once per device, an offline license file from the server
checked without it, and the grace period across a real restart of the server, inside the window and
past it.

Pending server side: while the server answers 404 for /api/client/trial these tests are skipped with
one line ("licensing models pending"); KW_REQUIRE_MODELS=1 makes that a failure.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request
from typing import Any, List

import _support
from _support import Collector
from keywarden import Client, ErrorCode, KeywardenError, OfflineReason

ENV = os.environ
CODE = "abcdef0123456789"
_ran: List[str] = []


def _post(url: str, body: Any = None, headers: Any = None) -> int:
    h = {"Content-Type": "application/json", **(headers or {})}
    req = urllib.request.Request(url, data=json.dumps(body or {}).encode(), method="POST", headers=h)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def require_models() -> None:
    """Skips (one line) while the server has no licensing models; fails with KW_REQUIRE_MODELS=1."""
    base = ENV.get("KW_BASE_URL")
    if not base:
        if ENV.get("KW_REQUIRE_INTEGRATION") == "1":
            raise RuntimeError("KW_REQUIRE_INTEGRATION=1 but KW_BASE_URL is not set")
        raise unittest.SkipTest("integration tests need a server: set KW_BASE_URL")
    # From its own address (X-Forwarded-For; the harness trusts 127.0.0.1): trial shares license's rate-limit bucket.
    if _post(base + "/api/client/trial", headers={"X-Forwarded-For": ENV.get("KW_MODELS_PROBE_ADDRESS", "198.51.100.212")}) == 404:
        if ENV.get("KW_REQUIRE_MODELS") == "1":
            raise RuntimeError("KW_REQUIRE_MODELS=1 but the server answers 404 for /api/client/trial")
        raise unittest.SkipTest("licensing models pending: the server answers 404 for /api/client/trial")
    if ENV.get("KW_MODELS_ERROR"):
        raise RuntimeError("the harness could not prepare app MODELS: " + ENV["KW_MODELS_ERROR"])


def control(action: str, body: Any = None) -> None:
    status = _post(f"{ENV['KW_MODELS_CONTROL_URL']}/{action}", body)
    if status != 200:
        raise AssertionError(f"models control {action} answered {status}")


def tearDownModule() -> None:
    print(f"\nPROTOCOL 12 tests run: {len(_ran)}", file=sys.stderr, flush=True)


class Clock:
    """The client's clock: the real time plus a shift the test sets."""

    def __init__(self) -> None:
        self.shift = 0.0

    def __call__(self) -> float:
        return time.time() + self.shift


class Models(unittest.TestCase):
    keys: List[str] = []

    @classmethod
    def setUpClass(cls) -> None:
        require_models()
        cls.keys = ENV["KW_KEYS_MODELS"].split(",")
        cls.settings = json.loads(ENV["KW_MODELS_SETTINGS"])
        cls._dir = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls) -> None:
        cls._dir.cleanup()

    def setUp(self) -> None:
        _ran.append(self.id())

    def models(self, **options: Any) -> Client:
        options.setdefault("state_file", os.path.join(self._dir.name, f"state-{len(_ran)}.json"))
        return Client.from_config(ENV["KW_CONFIG_MODELS"], **options)

    def error(self, fn: Any, *args: Any) -> KeywardenError:
        with self.assertRaises(KeywardenError) as cm:
            fn(*args)
        return cm.exception

    def test_a_trial_once_per_device(self) -> None:
        hwid = "sdk-py-trial-" + os.urandom(6).hex()
        c = self.models()
        c.init()
        t = c.trial(hwid)
        self.assertRegex(t.key, r"^TRIAL-[^-]{4}-[^-]{4}-[^-]{4}$")
        self.assertEqual(t.level, self.settings["trial_level"])
        assert t.expires_at is not None
        self.assertAlmostEqual(t.expires_at.timestamp(), c.server_now() + self.settings["trial_hours"] * 3600, delta=120)
        self.assertEqual(t.entitlements, ())
        hb = c.start_heartbeat(hwid, CODE, interval=1, channel="off", debugger_detected=lambda: False)
        self.assertEqual(hb.state, "healthy")
        hb.stop()
        # The same device again (a new session, the HWID in capitals): refused.
        again = self.models()
        again.init()
        e = self.error(again.trial, hwid.upper())
        self.assertEqual((e.code, e.status), (ErrorCode.TRIAL_USED, 403))
        # Another device still gets one.
        self.assertRegex(again.trial(hwid + "-b").key, r"^TRIAL-")
        # MODELS OFF keeps trials off.
        off = Client.from_config(ENV["KW_CONFIG_MODELS_OFF"])
        off.init()
        self.assertEqual(self.error(off.trial, hwid).code, ErrorCode.TRIAL_DISABLED)

    def test_an_offline_file_round_trip(self) -> None:
        hwid = "sdk-py-offline-" + os.urandom(6).hex()
        c = self.models()
        c.init()
        lic = c.activate_license(self.keys.pop(0), hwid)
        self.assertEqual(lic.entitlements, ("export", "pro"))
        self.assertTrue(c.has_entitlement("pro"))
        f = c.offline_file(hwid)
        # Checked by a program with no service at all: the pinned key, the config's app_id, the clock.
        offline = Client.from_config(ENV["KW_CONFIG_MODELS"], transport=lambda req: self.fail("no call expected"),
                                     state_file=os.path.join(self._dir.name, "offline-state.json"))
        ol = offline.load_offline(f, hwid)
        self.assertEqual((ol.app_id, ol.hwid, ol.level, ol.entitlements, ol.user), (ENV["KW_MODELS_APP_ID"], hwid, 3, ("export", "pro"), None))
        self.assertAlmostEqual((ol.valid_until - ol.issued_at).total_seconds(), self.settings["offline_days"] * 86400, delta=2)
        self.assertTrue(offline.has_entitlement("export"))
        self.assertEqual(self.error(offline.load_offline, f, hwid + "-other").reason, OfflineReason.WRONG_HWID)
        late = Client.from_config(ENV["KW_CONFIG_MODELS"], clock=lambda: time.time() + 8 * 86400,
                                  state_file=os.path.join(self._dir.name, "late-state.json"))
        self.assertEqual(self.error(late.load_offline, f, hwid).reason, OfflineReason.EXPIRED)
        # Another machine cannot have one for this key.
        self.assertEqual(self.error(c.offline_file, hwid + "-other").code, ErrorCode.HWID_MISMATCH)
        # MODELS OFF issues none (docs/protocol.md 12.5 lists "off" before "session not activated").
        off = Client.from_config(ENV["KW_CONFIG_MODELS_OFF"])
        off.init()
        self.assertEqual(self.error(off.offline_file, hwid).code, ErrorCode.OFFLINE_DISABLED)

    def test_grace_across_a_real_server_restart_inside_and_past_the_window(self) -> None:
        hwid = "sdk-py-grace-" + os.urandom(6).hex()
        clock = Clock()
        c = self.models(clock=clock)
        c.init()
        key = self.keys.pop(0)
        c.activate_license(key, hwid)
        grace = self.settings["grace_hours"] * 3600
        assert c.grace_until is not None
        self.assertAlmostEqual(c.grace_until.timestamp(), c.server_now() + grace, delta=120)
        beats, offline, expired, killed = Collector(), Collector(), Collector(), Collector()
        hb = c.start_heartbeat(
            hwid, CODE, interval=0.5, reauth=True, debugger_detected=lambda: False,
            on_beat=beats, on_offline=offline, on_grace_expired=expired, on_killed=killed,
        )
        try:
            beats.wait_for(1, 30)
            # Inside the window: the server goes away and comes back; the license stays valid throughout.
            control("down")
            offline.wait_for(1, 60)
            self.assertEqual(hb.state, "offline")
            self.assertTrue(c.grace_active())
            control("up")
            n = len(beats.items)
            beats.wait_for(n + 1, 90)
            self.assertEqual(hb.state, "healthy")
            self.assertTrue(c.grace_active())
            # Past the window: down again, and the clock passes grace_until before the server is back.
            control("down")
            offline.wait_for(2, 60)
            clock.shift = grace + 3600
            ev = expired.wait_for(1, 60)[0]
            self.assertEqual(ev.grace_until, c.grace_until)
            self.assertFalse(c.grace_active())
            self.assertEqual(hb.state, "degraded")
            clock.shift = 0
            control("up")
            n = len(beats.items)
            beats.wait_for(n + 1, 90)
            self.assertTrue(c.grace_active(), "the first verified beat grants a new grace period")
            # A verified refusal ends the grace at once.
            control("ban", {"key": key})
            killed.wait_for(1, 60)
            self.assertIsNone(c.grace_until)
        finally:
            clock.shift = 0
            control("up")
            hb.stop()


if __name__ == "__main__":
    unittest.main()
