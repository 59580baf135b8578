"""sdk/vectors/offline.json: offline license files (docs/protocol.md 12.5) accepted or refused for the reason
each case names, and what a grace_until value grants (12.6)."""
from __future__ import annotations

import unittest
from datetime import datetime, timezone

import _support
from keywarden import ErrorCode, KeywardenError, OfflineReason, ResponseKey
from keywarden.grace import Grace, grace_until_of
from keywarden.offline import MAX_FUTURE_SECONDS, MAX_ROLLBACK_SECONDS, verify_license_file
from keywarden.verify import pin_keys


class OfflineFileVectors(unittest.TestCase):
    def test_every_file_is_accepted_or_refused_with_its_reason(self) -> None:
        v = _support.load_vectors(self, "offline.json")
        self.assertEqual((v["max_future_seconds"], v["max_rollback_seconds"]), (MAX_FUTURE_SECONDS, MAX_ROLLBACK_SECONDS))
        airgap = _support.load_vectors(self, "airgap.json")
        every = set(v["reasons"]) | set(airgap["responses"]["reasons"]) | set(airgap["pools"]["reasons"])
        self.assertEqual(sorted(every), sorted(r.value for r in OfflineReason))
        keys = pin_keys(ResponseKey(kid=k["kid"], public_key=k["public_key"]) for k in v["pinned_keys"])
        seen = set()
        for c in v["cases"]:
            with self.subTest(case=c["name"]):
                try:
                    lic = verify_license_file(c["file"], keys, c["app_id"], c["hwid"], c["now"], c["last_seen"])
                except KeywardenError as e:
                    self.assertFalse(c["valid"], f"refused: {e.message}")
                    self.assertEqual((e.code, e.reason), (ErrorCode.OFFLINE_INVALID, OfflineReason(c["reason"])))
                    seen.add(c["reason"])
                    continue
                self.assertTrue(c["valid"], f"accepted, but should be refused as {c.get('reason')}")
                p = c["payload"]
                self.assertEqual((lic.app_id, lic.license_id, lic.user, lic.hwid, lic.level, lic.kid),
                                 (p["app_id"], p["license_id"], p["user"], p["hwid"], p["level"], p["kid"]))
                self.assertEqual(lic.entitlements, tuple(sorted(p["entitlements"])))
                self.assertEqual(lic.valid_until.isoformat().replace("+00:00", ""), p["valid_until"].replace(".000Z", ""))
                self.assertEqual(lic.expires_at is None, p["expires_at"] is None)
        self.assertEqual(seen, set(v["reasons"]))


class GraceVectors(unittest.TestCase):
    def test_what_each_grace_until_grants(self) -> None:
        for c in _support.load_vectors(self, "offline.json")["grace"]["cases"]:
            with self.subTest(case=c["name"]):
                answer = {"success": True}
                if "grace_until" in c:
                    answer["grace_until"] = c["grace_until"]
                until = grace_until_of(answer)
                self.assertEqual(until, None if c["until"] is None else round(c["until"] * 1000))
                g = Grace()
                g.note(answer)
                self.assertEqual(g.active(c["now"]), c["active"])
                if until is not None:
                    self.assertEqual(datetime.fromtimestamp(until / 1000, timezone.utc).year, 2026)


if __name__ == "__main__":
    unittest.main()
