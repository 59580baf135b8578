"""sdk/vectors/airgap.json: activation requests this SDK writes, answers to them accepted only for
the latest request's nonce, and seat pools accepted or refused for the reason each case names."""
from __future__ import annotations

import base64
import json
import unittest

import _support
from keywarden import ErrorCode, KeywardenError, OfflineReason, ResponseKey, build_request, verify_pool
from keywarden.airgap import check_request_nonce
from keywarden.offline import verify_license_file
from keywarden.verify import pin_keys


def _decode(text: str) -> object:
    tag, body = text.split(".")
    assert tag == "kwreq1" and "=" not in body
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode("utf-8"))


class AirgapVectors(unittest.TestCase):
    def setUp(self) -> None:
        self.v = _support.load_vectors(self, "airgap.json")
        self.keys = pin_keys(ResponseKey(kid=k["kid"], public_key=k["public_key"]) for k in self.v["pinned_keys"])

    def test_requests_carry_exactly_the_fields(self) -> None:
        for c in self.v["requests"]["cases"]:
            with self.subTest(case=c["name"]):
                mine = build_request(c["app_id"], c["key"], c["hwid"], c["nonce"], c["created_at"], c.get("components"))
                self.assertEqual(_decode(mine), _decode(c["request"]))
                self.assertEqual(len(base64.urlsafe_b64decode(c["nonce"] + "==")), 16)

    def test_answers_only_for_the_latest_nonce(self) -> None:
        seen = set()
        for c in self.v["responses"]["cases"]:
            with self.subTest(case=c["name"]):
                try:
                    lic = verify_license_file(c["file"], self.keys, c["app_id"], c["hwid"], c["now"], c["last_seen"])
                    check_request_nonce(c["file"], c["nonce"])
                except KeywardenError as e:
                    self.assertFalse(c["valid"], f"refused: {e.message}")
                    self.assertEqual((e.code, e.reason), (ErrorCode.OFFLINE_INVALID, OfflineReason(c["reason"])))
                    seen.add(c["reason"])
                    continue
                self.assertTrue(c["valid"], f"accepted, but should be refused as {c.get('reason')}")
                self.assertEqual(lic.license_id, c["payload"]["license_id"])
        self.assertEqual(seen, set(self.v["responses"]["reasons"]))

    def test_pools(self) -> None:
        seen = set()
        for c in self.v["pools"]["cases"]:
            with self.subTest(case=c["name"]):
                try:
                    pool = verify_pool(c["pool"], self.keys, c["app_id"], c["now"])
                except KeywardenError as e:
                    self.assertFalse(c["valid"], f"refused: {e.message}")
                    self.assertEqual((e.code, e.reason), (ErrorCode.OFFLINE_INVALID, OfflineReason(c["reason"])))
                    seen.add(c["reason"])
                    continue
                self.assertTrue(c["valid"], f"accepted, but should be refused as {c.get('reason')}")
                p = c["payload"]
                self.assertEqual((pool.app_id, pool.license_id, pool.relay_id, pool.seats, pool.level, pool.kid),
                                 (p["app_id"], p["license_id"], p["relay_id"], p["seats"], p["level"], p["kid"]))
                self.assertEqual(pool.entitlements, tuple(sorted(p["entitlements"])))
                self.assertEqual(pool.expires_at is None, p["expires_at"] is None)
        self.assertEqual(seen, set(self.v["pools"]["reasons"]))


if __name__ == "__main__":
    unittest.main()
