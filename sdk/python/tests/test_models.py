"""The licensing models of docs/protocol.md 12 on the client, against FakeKeywarden: trials, entitlements,
offline license files with their state file, and the grace period of the client calls."""
from __future__ import annotations

import json
import os
import tempfile
import time
import unittest
from pathlib import Path
from typing import Any
from unittest import mock

import _support
from _support import FakeKeywarden, iso, license_file
from keywarden import Client, ConfigError, ErrorCode, KeywardenError, OfflineReason, TrialInfo, VerificationReason
from keywarden.models import LicenseActivation
from keywarden.offline import default_state_file

HWID = "hwid-aaaaaaaa"


class Clock:
    """A settable clock (seconds) for the client; starts at the real time."""

    def __init__(self) -> None:
        self.shift = 0.0

    def __call__(self) -> float:
        return time.time() + self.shift


def client(fake: FakeKeywarden, tmp: str, **options: Any) -> Client:
    options.setdefault("state_file", os.path.join(tmp, "state.json"))
    return Client.from_config(fake.config(), transport=fake, **options)


class Base(unittest.TestCase):
    def setUp(self) -> None:
        self._dir = tempfile.TemporaryDirectory()
        self.tmp = self._dir.name
        self.addCleanup(self._dir.cleanup)

    def error(self, fn: Any, *args: Any) -> KeywardenError:
        with self.assertRaises(KeywardenError) as cm:
            fn(*args)
        return cm.exception


class Trials(Base):
    def test_a_trial_activates_a_key_once_per_device(self) -> None:
        fake = FakeKeywarden()
        fake.trial_hours = 72
        c = client(fake, self.tmp)
        c.init()
        t = c.trial(HWID)
        self.assertIsInstance(t, TrialInfo)
        self.assertRegex(t.key, r"^TRIAL-")
        self.assertEqual((t.level, t.entitlements, t.message), (1, (), "Trial started"))
        self.assertIsNotNone(t.expires_at)
        self.assertEqual(fake.bodies[-1], {"session": c.session, "hwid": HWID})
        # The trial key is what a heartbeat's re-authentication repeats.
        self.assertEqual(c.last_activation, LicenseActivation(t.key, HWID))
        c.reauthenticate()
        self.assertEqual(fake.bodies[-1]["license"], t.key)
        again = client(fake, self.tmp)
        again.init()
        e = self.error(again.trial, HWID.upper())
        self.assertEqual((e.code, e.status, e.detail), (ErrorCode.TRIAL_USED, 403, "Trial already used on this device."))

    def test_trials_off(self) -> None:
        c = client(FakeKeywarden(), self.tmp)
        c.init()
        e = self.error(c.trial, HWID)
        self.assertEqual((e.code, e.status), (ErrorCode.TRIAL_DISABLED, 403))

    def test_a_trial_answer_without_key_is_malformed(self) -> None:
        fake = FakeKeywarden()
        fake.handlers["trial"] = lambda f, req, body: f.ok(req, body, {"level": 1, "expires_at": None})
        c = client(fake, self.tmp)
        c.init()
        e = self.error(c.trial, HWID)
        self.assertEqual((e.code, e.reason), (ErrorCode.VERIFICATION, VerificationReason.MALFORMED))


class Entitlements(Base):
    def test_license_answer_entitlements_sorted_on_result_and_client(self) -> None:
        fake = FakeKeywarden()
        c = client(fake, self.tmp)
        self.assertEqual(c.entitlements, ())
        c.init()
        lic = c.activate_license("KEY-GOOD-0001", HWID)
        self.assertEqual(lic.entitlements, ("export", "pro"))
        self.assertTrue(lic.has_entitlement("pro") and c.has_entitlement("export"))
        self.assertFalse(c.has_entitlement("enterprise"))
        # Another key without entitlements replaces them.
        c.init()
        c.activate_license("KEY-GOOD-0002", HWID)
        self.assertEqual(c.entitlements, ())

    def test_register_and_login_carry_them(self) -> None:
        fake = FakeKeywarden()
        c = client(fake, self.tmp)
        c.init()
        u = c.register("alice", "pass-1234", "KEY-GOOD-0001", HWID)
        self.assertEqual(u.entitlements, ("export", "pro"))
        c.init()
        self.assertEqual(c.login("alice", "pass-1234", HWID).entitlements, ("export", "pro"))
        self.assertTrue(c.has_entitlement("pro"))

    def test_entitlements_that_are_not_a_list_of_codes_are_malformed(self) -> None:
        for bad in ("pro", [1, 2], {"pro": True}):
            fake = FakeKeywarden()
            fake.handlers["license"] = lambda f, req, body, bad=bad: f.ok(req, body, {"level": 3, "expires_at": None, "entitlements": bad})
            c = client(fake, self.tmp)
            c.init()
            e = self.error(c.activate_license, "KEY-GOOD-0001", HWID)
            self.assertEqual(e.reason, VerificationReason.MALFORMED, bad)


class OfflineFiles(Base):
    def activated(self, fake: FakeKeywarden, **options: Any) -> Client:
        fake.offline_days = 7
        c = client(fake, self.tmp, **options)
        c.init()
        c.activate_license("KEY-GOOD-0001", HWID)
        return c

    def test_round_trip_then_checked_without_the_service(self) -> None:
        fake = FakeKeywarden()
        f = self.activated(fake).offline_file(HWID)
        self.assertTrue(f.startswith("kwlic1."))
        self.assertEqual(fake.bodies[-1]["hwid"], HWID)
        # A fresh program, no network at all: only the pinned key and the config.
        offline = Client.from_config(fake.config(), transport=lambda req: self.fail("no call expected"), state_file=os.path.join(self.tmp, "state.json"))
        lic = offline.load_offline(f + "\n", HWID)
        self.assertEqual((lic.level, lic.entitlements, lic.app_id, lic.hwid, lic.user), (3, ("export", "pro"), _support.APP_ID, HWID, None))
        self.assertTrue(offline.has_entitlement("pro"))
        self.assertGreater(lic.valid_until, lic.issued_at)
        e = self.error(offline.load_offline, f, "hwid-bbbbbbbb")
        self.assertEqual((e.code, e.reason), (ErrorCode.OFFLINE_INVALID, OfflineReason.WRONG_HWID))

    def test_offline_off_and_hwid_refusals_are_typed(self) -> None:
        fake = FakeKeywarden()
        c = self.activated(fake)
        e = self.error(c.offline_file, "hwid-bbbbbbbb")
        self.assertEqual(e.code, ErrorCode.HWID_MISMATCH)
        fake.offline_days = 0
        e = self.error(c.offline_file, HWID)
        self.assertEqual((e.code, e.status), (ErrorCode.OFFLINE_DISABLED, 403))

    def test_files_of_another_key_or_app_are_refused(self) -> None:
        fake = FakeKeywarden()
        c = self.activated(fake)
        f = c.offline_file(HWID)
        other = FakeKeywarden()  # another server key under the same kid
        e = self.error(Client.from_config(other.config(), transport=other, state_file=os.path.join(self.tmp, "s2")).load_offline, f, HWID)
        self.assertEqual(e.reason, OfflineReason.BAD_SIGNATURE)
        e = self.error(Client.from_config(fake.config(app_id="another-app"), transport=fake, state_file=os.path.join(self.tmp, "s3")).load_offline, f, HWID)
        self.assertEqual(e.reason, OfflineReason.WRONG_APP)
        with self.assertRaises(ConfigError):
            cfg = fake.config()
            del cfg["app_id"]
            Client.from_config(cfg, transport=fake).load_offline(f, HWID)

    def test_the_state_file_catches_a_clock_set_back(self) -> None:
        fake = FakeKeywarden()
        clock = Clock()
        c = self.activated(fake, clock=clock)
        f = c.offline_file(HWID)
        c.load_offline(f, HWID)
        state = Path(self.tmp, "state.json")
        self.assertEqual(c.state_file, str(state))
        seen = json.loads(state.read_text())
        self.assertEqual(seen["v"], 1)
        self.assertAlmostEqual(seen["last_seen"], time.time(), delta=5)
        clock.shift = 3 * 86400  # three days on: still valid, and the record moves on
        c.load_offline(f, HWID)
        clock.shift = 86400  # then back two days
        e = self.error(c.load_offline, f, HWID)
        self.assertEqual(e.reason, OfflineReason.CLOCK_ROLLED_BACK)
        self.assertAlmostEqual(json.loads(state.read_text())["last_seen"], time.time() + 3 * 86400, delta=5, msg="never lowered")
        clock.shift = 8 * 86400
        self.assertEqual(self.error(c.load_offline, f, HWID).reason, OfflineReason.EXPIRED)

    def test_a_damaged_state_file_counts_as_no_record_and_is_rewritten(self) -> None:
        fake = FakeKeywarden()
        c = self.activated(fake)
        f = c.offline_file(HWID)
        state = Path(self.tmp, "state.json")
        for junk in (b"", b"not json", b'{"last_seen": "yesterday"}', b"\xff\xfe", b"[1]"):
            state.write_bytes(junk)
            self.assertEqual(c.load_offline(f, HWID).level, 3, junk)
            self.assertIsInstance(json.loads(state.read_text())["last_seen"], int)

    def test_an_unwritable_state_file_does_not_stop_the_check(self) -> None:
        fake = FakeKeywarden()
        blocker = Path(self.tmp, "a-file")
        blocker.write_text("x")
        c = self.activated(fake, state_file=str(blocker / "state.json"))  # its directory is a file
        self.assertEqual(c.load_offline(c.offline_file(HWID), HWID).level, 3)

    def test_default_state_file_per_user_and_application(self) -> None:
        with mock.patch.dict(os.environ, {"XDG_STATE_HOME": "/tmp/xdg-state"}), mock.patch("sys.platform", "linux"):
            p = default_state_file("kwpk_app_one")
        self.assertEqual(p.parent, Path("/tmp/xdg-state/keywarden"))
        self.assertRegex(p.name, r"^[0-9a-f]{16}\.json$")
        self.assertNotEqual(p, default_state_file("kwpk_app_two"))
        with mock.patch.dict(os.environ, {"HOME": "/home/u"}, clear=True), mock.patch("sys.platform", "linux"):
            self.assertEqual(default_state_file("k").parent, Path("/home/u/.local/state/keywarden"))

    def test_a_file_signed_under_an_unpinned_kid(self) -> None:
        fake = FakeKeywarden()
        now = time.time()
        f = license_file(fake.key, {
            "v": 1, "kid": "k9", "app_id": _support.APP_ID, "license_id": "l", "user": None, "hwid": HWID, "level": 1,
            "entitlements": [], "expires_at": None, "issued_at": iso(now), "valid_until": iso(now + 60),
        })
        c = client(fake, self.tmp)
        self.assertEqual(self.error(c.load_offline, f, HWID).reason, OfflineReason.UNKNOWN_KID)
        self.assertEqual(self.error(c.load_offline, "kwlic1.x.y", HWID).reason, OfflineReason.MALFORMED)


class GraceOfCalls(Base):
    def test_verified_answers_set_it_refusals_end_it(self) -> None:
        fake = FakeKeywarden()
        fake.grace_seconds = 3600
        c = client(fake, self.tmp)
        c.init()
        self.assertIsNone(c.grace_until)
        c.activate_license("KEY-GOOD-0001", HWID)
        assert c.grace_until is not None
        self.assertAlmostEqual(c.grace_until.timestamp(), time.time() + 3600, delta=5)
        self.assertTrue(c.grace_active())
        # A verified refusal ends it at once.
        e = self.error(c.activate_license, "KEY-UNKNOWN", HWID)
        self.assertEqual(e.code, ErrorCode.INVALID_KEY)
        self.assertIsNone(c.grace_until)
        self.assertFalse(c.grace_active())

    def test_an_answer_without_grace_until_grants_none_and_429_ends_nothing(self) -> None:
        fake = FakeKeywarden()
        fake.grace_seconds = 600
        c = client(fake, self.tmp)
        c.init()
        c.activate_license("KEY-GOOD-0001", HWID)
        fake.handlers["license"] = lambda f, req, body: f.fail(req, 429, "Rate limit exceeded", headers={"retry-after": "3"})
        self.assertEqual(self.error(c.activate_license, "KEY-GOOD-0001", HWID).code, ErrorCode.RATE_LIMITED)
        self.assertTrue(c.grace_active(), "429 says 'not now', not 'no'")
        fake.grace_seconds = None
        del fake.handlers["license"]
        c.activate_license("KEY-GOOD-0001", HWID)
        self.assertIsNone(c.grace_until)

    def test_an_answer_that_fails_verification_grants_nothing(self) -> None:
        fake = FakeKeywarden()
        fake.grace_seconds = 600
        c = client(fake, self.tmp)
        c.init()
        c.activate_license("KEY-GOOD-0001", HWID)
        before = c.grace_until
        fake.grace_seconds = 30 * 86400
        forger = FakeKeywarden()  # signs with a key the client does not pin
        fake.after = lambda req, res: forger.sign(req, res.status, res.body)
        e = self.error(c.activate_license, "KEY-GOOD-0001", HWID)
        self.assertEqual((e.code, e.reason), (ErrorCode.VERIFICATION, VerificationReason.BAD_SIGNATURE))
        self.assertEqual(c.grace_until, before)

    def test_an_unsigned_gateway_5xx_is_the_service_unreachable_not_an_attack(self) -> None:
        fake = FakeKeywarden()
        c = client(fake, self.tmp)
        c.init()
        for status in (502, 503, 504):
            fake.after = lambda req, res, status=status: _support.TransportResponse(status=status, headers={"content-type": "text/html"}, body=b"<html>bad gateway</html>")
            e = self.error(c.activate_license, "KEY-GOOD-0001", HWID)
            self.assertEqual((e.code, e.status, e.reason), (ErrorCode.SERVER, status, None))
        fake.after = lambda req, res: _support.TransportResponse(status=500, headers={}, body=b"oops")
        self.assertEqual(self.error(c.activate_license, "KEY-GOOD-0001", HWID).reason, VerificationReason.UNSIGNED, "500 is the service's own")


if __name__ == "__main__":
    unittest.main()
