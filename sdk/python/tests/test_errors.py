"""The error table against sdk/vectors/errors.json (generated from the server's src/errors.ts),
and the fields each error carries."""
from __future__ import annotations

import unittest

import _support  # noqa: F401  (sys.path)
from keywarden import ERROR_ENTRIES, FALLBACK_CODE, STATUS_FALLBACKS, ErrorCode, KeywardenError, code_for, error_from_answer


class ErrorTableMatchesVectors(unittest.TestCase):
    def setUp(self) -> None:
        self.v = _support.load_vectors(self, "errors.json")

    def test_codes_are_the_enum(self) -> None:
        self.assertEqual([c.value for c in ErrorCode], self.v["codes"])

    def test_entries_are_the_table(self) -> None:
        ours = [(s, d, c.value) for s, d, c in ERROR_ENTRIES]
        theirs = [(e["status"], e["detail"], e["sdk_code"]) for e in self.v["entries"]]
        self.assertEqual(sorted(ours), sorted(theirs))
        self.assertEqual(len(ours), len(set((s, d) for s, d, _ in ours)), "no (status, detail) twice")

    def test_fallbacks(self) -> None:
        self.assertEqual({str(k): c.value for k, c in STATUS_FALLBACKS.items()}, self.v["status_fallbacks"])
        self.assertEqual(FALLBACK_CODE.value, self.v["fallback"])

    def test_every_entry_maps_through_code_for(self) -> None:
        for e in self.v["entries"]:
            with self.subTest(detail=e["detail"]):
                self.assertEqual(code_for(e["status"], e["detail"]).value, e["sdk_code"])
                err = error_from_answer(e["status"], e["detail"], None)
                self.assertIsInstance(err, KeywardenError)
                self.assertEqual((err.code.value, err.status, err.detail), (e["sdk_code"], e["status"], e["detail"]))

    def test_extra_cases(self) -> None:
        self.assertGreater(len(self.v["extra_cases"]), 0)
        for e in self.v["extra_cases"]:
            with self.subTest(why=e["why"], status=e["status"]):
                self.assertEqual(code_for(e["status"], e["detail"]).value, e["sdk_code"])
                self.assertEqual(error_from_answer(e["status"], e["detail"]).detail, e["detail"])


class ErrorFields(unittest.TestCase):
    def test_update_required_carries_version_and_url(self) -> None:
        detail = {"message": "Version 2.0 is out.", "latest_version": "2.0", "update_url": "https://example.com/dl", "force_update": True}
        e = error_from_answer(426, detail)
        self.assertIs(e.code, ErrorCode.UPDATE_REQUIRED)
        self.assertEqual((e.latest_version, e.update_url), ("2.0", "https://example.com/dl"))
        self.assertIn("Version 2.0 is out.", str(e))

    def test_update_required_with_odd_detail_has_no_fields(self) -> None:
        e = error_from_answer(426, {"latest_version": 2})
        self.assertIs(e.code, ErrorCode.UPDATE_REQUIRED)
        self.assertIsNone(e.latest_version)
        self.assertIsNone(e.update_url)

    def test_retry_after(self) -> None:
        self.assertEqual(error_from_answer(429, "Rate limit exceeded", "17").retry_after, 17)
        self.assertEqual(error_from_answer(429, "Too many failed attempts, try again later.", " 900 ").retry_after, 900)
        self.assertIs(error_from_answer(429, "Too many failed attempts, try again later.").code, ErrorCode.LOCKED_OUT)
        for bad in ["soon", "-1", "nan", "inf", "Wed, 21 Oct 2015 07:28:00 GMT"]:
            with self.subTest(header=bad):
                self.assertIsNone(error_from_answer(429, "Rate limit exceeded", bad).retry_after)

    def test_codes_compare_as_strings(self) -> None:
        e = error_from_answer(403, "HWID mismatch. Key locked to another device.")
        self.assertEqual(e.code, "hwid_mismatch")
        self.assertIs(e.code, ErrorCode.HWID_MISMATCH)
        self.assertEqual(str(e.code), "hwid_mismatch")
        self.assertIn("hwid_mismatch", repr(e))

    def test_unknown_answers_fall_back_to_server_with_status_and_detail(self) -> None:
        e = error_from_answer(418, ["teapot", 1])
        self.assertIs(e.code, ErrorCode.SERVER)
        self.assertEqual((e.status, e.detail), (418, ["teapot", 1]))


if __name__ == "__main__":
    unittest.main()
