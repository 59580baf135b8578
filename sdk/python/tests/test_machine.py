"""machine_hwid, self_hash and the debugger probe."""
from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import threading
import unittest

import _support  # noqa: F401  (sys.path)
from keywarden import debugger_attached, hwid_for, machine_hwid, raw_machine_id, self_hash
from keywarden.machine import parse_ioreg


class Hwid(unittest.TestCase):
    def test_formula_agrees_with_the_other_sdks(self) -> None:
        # The same constant is checked by sdk/csharp (MachineTests) for the same inputs.
        self.assertEqual(hwid_for("salt-1", "  ABCDEF0123\n"), "d32ec95a313118592080fd382e60387809ad542f5ff06fab8c1f111f8b889db8")

    def test_salted_stable_and_never_the_raw_id(self) -> None:
        a = machine_hwid("app-a")
        self.assertRegex(a, r"^[0-9a-f]{64}$")
        self.assertEqual(a, machine_hwid("app-a"))
        self.assertNotEqual(a, machine_hwid("app-b"))
        raw = raw_machine_id()
        if raw:
            self.assertEqual(a, hwid_for("app-a", raw))
            self.assertNotIn(raw.strip().lower(), a)

    @unittest.skipUnless(sys.platform.startswith("linux") and os.path.isfile("/etc/machine-id"), "Linux with /etc/machine-id")
    def test_linux_reads_etc_machine_id(self) -> None:
        with open("/etc/machine-id", encoding="utf-8") as f:
            self.assertEqual(raw_machine_id(), f.read().strip())

    def test_ioreg_parsing(self) -> None:
        out = '+-o Mac  <class IOPlatformExpertDevice>\n    {\n      "IOPlatformSerialNumber" = "C02X"\n      "IOPlatformUUID" = "1A2B3C4D-0000-1111-2222-333344445555"\n    }\n'
        self.assertEqual(parse_ioreg(out), "1A2B3C4D-0000-1111-2222-333344445555")
        self.assertEqual(parse_ioreg("nothing"), "")


class SelfHash(unittest.TestCase):
    def test_hash_of_a_file(self) -> None:
        with tempfile.NamedTemporaryFile(delete=False) as f:
            f.write(b"program bytes" * 100000)
        self.addCleanup(os.unlink, f.name)
        self.assertEqual(self_hash(f.name), hashlib.sha256(b"program bytes" * 100000).hexdigest())

    def test_default_is_the_running_program(self) -> None:
        self.assertRegex(self_hash(), r"^[0-9a-f]{64}$")


class Debugger(unittest.TestCase):
    def test_no_debugger_here(self) -> None:
        self.assertFalse(debugger_attached())

    def test_a_trace_function_is_a_debugger(self) -> None:
        def tracer(frame, event, arg):  # type: ignore[no-untyped-def]
            return None

        seen = []
        old = sys.gettrace()
        sys.settrace(tracer)
        try:
            seen.append(debugger_attached())
        finally:
            sys.settrace(old)
        self.assertEqual(seen, [True])
        # threading.settrace reaches threads started later, such as the heartbeat's
        if hasattr(threading, "gettrace"):
            threading.settrace(tracer)
            try:
                self.assertTrue(debugger_attached())
            finally:
                threading.settrace(None)  # type: ignore[arg-type]
        self.assertFalse(debugger_attached())


if __name__ == "__main__":
    unittest.main()
