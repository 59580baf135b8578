"""Machine identity and integrity helpers.

The raw machine id never leaves the machine: what is sent is
sha256("kwhwid1\\n" + salt + "\\n" + lower(trim(id))), so two vendors (different salts) cannot
correlate their users and a leaked hwid does not reveal the id. Same formula in every SDK.
"""
from __future__ import annotations

import hashlib
import os
import platform
import re
import subprocess
import sys
import threading
from typing import Iterable, Optional

__all__ = ["raw_machine_id", "hwid_for", "machine_hwid", "self_hash", "debugger_attached", "parse_ioreg"]


def _read_first(files: Iterable[str]) -> str:
    for f in files:
        try:
            with open(f, "r", encoding="utf-8", errors="replace") as fh:
                v = fh.read().strip()
            if v:
                return v
        except OSError:
            continue
    return ""


def _windows_machine_guid() -> str:
    if sys.platform != "win32":  # also tells type checkers on other platforms to skip the block
        return ""
    import winreg

    # KEY_WOW64_64KEY: a 32-bit Python on 64-bit Windows must read the 64-bit view, where the
    # GUID that every other program sees lives.
    access = winreg.KEY_READ | winreg.KEY_WOW64_64KEY
    try:
        with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, r"SOFTWARE\Microsoft\Cryptography", 0, access) as k:
            value = winreg.QueryValueEx(k, "MachineGuid")[0]
            return str(value)
    except OSError:
        return ""


def parse_ioreg(output: str) -> str:
    """IOPlatformUUID from ``ioreg -rd1 -c IOPlatformExpertDevice`` output, or ''."""
    m = re.search(r'"IOPlatformUUID"\s*=\s*"([^"]+)"', output)
    return m.group(1) if m else ""


def _mac_platform_uuid() -> str:
    try:
        out = subprocess.run(
            ["ioreg", "-rd1", "-c", "IOPlatformExpertDevice"],
            capture_output=True, text=True, timeout=5, check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return parse_ioreg(out)


def raw_machine_id() -> str:
    """The platform's machine id: Windows MachineGuid, Linux /etc/machine-id, macOS IOPlatformUUID."""
    if sys.platform == "win32":
        return _windows_machine_guid()
    if sys.platform == "darwin":
        return _mac_platform_uuid()
    return _read_first(["/etc/machine-id", "/var/lib/dbus/machine-id"])


def hwid_for(salt: str, raw_id: str) -> str:
    """The hwid formula on its own (64 lower-case hex characters)."""
    data = f"kwhwid1\n{salt}\n{raw_id.strip().lower()}".encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def machine_hwid(salt: str = "") -> str:
    """A stable, salted hardware id. The client passes its api_key as salt.

    Without a platform id (containers without /etc/machine-id) it falls back to host name,
    platform and CPU architecture, which is weaker: pass your own hwid to the activation calls if
    that matters.
    """
    raw = raw_machine_id().strip()
    if not raw:
        raw = f"fallback:{platform.node()}:{sys.platform}:{platform.machine()}:{platform.processor()}"
    return hwid_for(salt, raw)


def _default_program() -> str:
    # A frozen program (PyInstaller, cx_Freeze, Nuitka onefile) is its executable; otherwise the
    # entry script is what the vendor shipped, not the Python interpreter.
    if getattr(sys, "frozen", False):
        return sys.executable
    main = sys.modules.get("__main__")
    candidate = getattr(main, "__file__", None) or (sys.argv[0] if sys.argv and sys.argv[0] else None)
    if candidate and os.path.isfile(candidate):
        return os.path.abspath(candidate)
    return sys.executable


def self_hash(file: Optional[str] = None) -> str:
    """SHA-256 (lower-case hex) of the running program, for code_hash / binary_hash."""
    target = file or _default_program()
    h = hashlib.sha256()
    with open(target, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _tracer_is_debugger(tracer: object) -> bool:
    if tracer is None:
        return False
    # coverage.py installs a trace function too; a coverage run is not a debugger.
    module = getattr(type(tracer), "__module__", "") or getattr(tracer, "__module__", "") or ""
    return not str(module).startswith("coverage")


def _native_debugger() -> bool:
    if sys.platform == "win32":
        try:
            import ctypes

            return bool(ctypes.windll.kernel32.IsDebuggerPresent())
        except Exception:  # noqa: BLE001
            return False
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/self/status", "r", encoding="ascii", errors="replace") as f:
                for line in f:
                    if line.startswith("TracerPid:"):
                        return line.split(":", 1)[1].strip() not in ("", "0")
        except OSError:
            return False
    return False


def debugger_attached() -> bool:
    """True when a Python debugger (pdb, pydevd/PyCharm, debugpy) or a native one (gdb, strace,
    a Windows debugger) is attached. Heartbeats report it as ``debugger_detected``."""
    if "pydevd" in sys.modules:  # PyCharm's and VS Code's (debugpy) debugger core
        return True
    debugpy = sys.modules.get("debugpy")
    if debugpy is not None:
        try:
            if debugpy.is_client_connected():  # type: ignore[attr-defined]
                return True
        except Exception:  # noqa: BLE001
            pass
    if _tracer_is_debugger(sys.gettrace()):
        return True
    gettrace = getattr(threading, "gettrace", None)
    if gettrace is not None and _tracer_is_debugger(gettrace()):
        return True
    return _native_debugger()
