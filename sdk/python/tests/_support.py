"""Shared test support: puts this SDK's source first on sys.path (the tests run from any
directory with `python3 -m unittest discover -s sdk/python/tests`), finds sdk/vectors, and
provides FakeKeywarden, an in-process transport that answers like the server and signs every
answer with its own Ed25519 key, so hostile variants can be produced one field at a time.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import sys
import threading
import time
import unittest
from pathlib import Path
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional

SDK_ROOT = Path(__file__).resolve().parents[1]
if str(SDK_ROOT) not in sys.path:
    sys.path.insert(0, str(SDK_ROOT))

from cryptography.hazmat.primitives import padding  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes  # noqa: E402
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat  # noqa: E402

from keywarden import TransportError, TransportRequest, TransportResponse  # noqa: E402
from keywarden.crypto import beat_proof, response_message, start_proof  # noqa: E402


def vectors_dir() -> Optional[Path]:
    """sdk/vectors (KW_VECTORS_DIR, else next to this SDK in the repository), or None."""
    env = os.environ.get("KW_VECTORS_DIR")
    candidates = [Path(env)] if env else []
    candidates.append(SDK_ROOT.parent / "vectors")
    for c in candidates:
        if (c / "errors.json").is_file():
            return c
    return None


def load_vectors(test: unittest.TestCase, name: str) -> Dict[str, Any]:
    d = vectors_dir()
    if d is None:
        # The dashboard's zip carries the SDK without the repository's sdk/vectors.
        if os.environ.get("KW_REQUIRE_VECTORS") == "1":
            test.fail("sdk/vectors not found (KW_REQUIRE_VECTORS=1)")
        test.skipTest("sdk/vectors not found (set KW_VECTORS_DIR)")
    with open(d / name, "r", encoding="utf-8") as f:
        return json.load(f)


API_KEY = "0123456789abcdef0123456789abcdef"
SECRET = "kwsk_fake_secret_0001"


def raw_public(key: Ed25519PrivateKey) -> str:
    return base64.b64encode(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode("ascii")


def encrypt(plaintext: bytes, enc_key: str, api_secret: str, init_iv: str) -> str:
    key = hashlib.sha256(f"{enc_key}-{api_secret}".encode()).digest()
    iv = hashlib.sha256(init_iv.encode()).digest()[:16]
    padder = padding.PKCS7(128).padder()
    data = padder.update(plaintext) + padder.finalize()
    enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    return base64.b64encode(enc.update(data) + enc.finalize()).decode("ascii")


Handler = Callable[["FakeKeywarden", TransportRequest, Dict[str, Any]], TransportResponse]

APP_ID = "fake-app-0001"


def iso(unix_seconds: float) -> str:
    """docs/protocol.md 1's form: 2026-11-21T22:00:00.000Z."""
    d = datetime.fromtimestamp(unix_seconds, timezone.utc)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z"


def parse_iso(text: str) -> float:
    """Unix seconds of docs/protocol.md 1's form."""
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def license_file(key: Ed25519PrivateKey, payload: Dict[str, Any]) -> str:
    """docs/protocol.md 12.5: kwlic1.<base64url(payload)>.<base64url(Ed25519(kwlic1.<payload>))>."""
    head = "kwlic1." + b64url(json.dumps(payload).encode("utf-8"))
    return head + "." + b64url(key.sign(head.encode("ascii")))


class FakeKeywarden:
    """A transport with the server's client API in miniature (init, register, login, license,
    heartbeat/start, heartbeat, heartbeat/stop), docs/protocol.md 4-6 exactly. Tests replace single
    endpoints with `handlers[path]`, or spoil answers with `after`."""

    def __init__(self, *, secret: Optional[str] = None, shift: float = 0.0, beat_interval: int = 5) -> None:
        self.key = Ed25519PrivateKey.generate()
        self.kid = "k1"
        self.secret = secret
        self.shift = shift  # server clock minus real clock, seconds
        self.beat_interval = beat_interval
        self.requests: List[TransportRequest] = []
        self.bodies: List[Dict[str, Any]] = []
        self.handlers: Dict[str, Handler] = {}
        self.after: Optional[Callable[[TransportRequest, TransportResponse], TransportResponse]] = None
        self.before: Optional[Callable[[TransportRequest, int], None]] = None
        self.lock = threading.Lock()
        self.sessions: Dict[str, Dict[str, Any]] = {}
        self.keys = {"KEY-GOOD-0001": {"hwid": None, "level": 3}, "KEY-GOOD-0002": {"hwid": None, "level": 2}}
        self.users: Dict[str, Dict[str, Any]] = {}
        self.heartbeats: Dict[str, Dict[str, Any]] = {}
        self.stopped: List[Dict[str, Any]] = []
        # docs/protocol.md 12: entitlements per key, trials, offline files and the grace period.
        self.entitlements: Dict[str, List[str]] = {"KEY-GOOD-0001": ["pro", "export"]}
        self.trial_hours = 0
        self.trials: Dict[str, str] = {}  # hwid -> trial key
        self.offline_days = 0
        self.grace_seconds: Optional[int] = None
        # The keys' expires_at; past it (enforce_expiry) beats are refused as the server's expiry kill does.
        self.expires_at = "2099-01-02T03:04:05.678Z"
        self.enforce_expiry = False

    # --- configuration -------------------------------------------------------------------------
    def config(self, **extra: Any) -> Dict[str, Any]:
        c: Dict[str, Any] = {
            "format": 1, "base_url": "http://fake.invalid", "app_name": "Fake App", "api_key": API_KEY, "version": "1.0", "app_id": APP_ID,
            "response_keys": [{"kid": self.kid, "alg": "Ed25519", "public_key": raw_public(self.key)}],
        }
        if self.secret:
            c["api_secret"] = self.secret
        c.update(extra)
        return c

    def paths(self) -> List[str]:
        return [r.url.split("/api/client/", 1)[1] for r in self.requests]

    # --- answers -------------------------------------------------------------------------------
    def sign(self, req: TransportRequest, status: int, body: bytes, *, shift: Optional[float] = None,
             nonce: Optional[str] = None, kid: Optional[str] = None, key: Optional[Ed25519PrivateKey] = None,
             headers: Optional[Dict[str, str]] = None) -> TransportResponse:
        ts = str(int(time.time() + (self.shift if shift is None else shift)))
        path = "/api/client/" + req.url.split("/api/client/", 1)[1]
        n = req.headers.get("X-Nonce", "") if nonce is None else nonce
        k = kid or self.kid
        msg = response_message(k, "POST", path, status, ts, n, body)
        sig = base64.b64encode((key or self.key).sign(msg.encode())).decode("ascii")
        h = {"content-type": "application/json", "x-response-kid": k, "x-response-timestamp": ts, "x-response-signature": sig}
        h.update(headers or {})
        return TransportResponse(status=status, headers=h, body=body)

    def answer(self, req: TransportRequest, status: int, obj: Any, **kw: Any) -> TransportResponse:
        return self.sign(req, status, json.dumps(obj).encode(), **kw)

    def fail(self, req: TransportRequest, status: int, detail: Any, **kw: Any) -> TransportResponse:
        return self.answer(req, status, {"detail": detail}, **kw)

    def granted(self, obj: Dict[str, Any]) -> Dict[str, Any]:
        """obj plus grace_until when the fake grants a grace period."""
        if self.grace_seconds is not None:
            return {**obj, "grace_until": iso(time.time() + self.shift + self.grace_seconds)}
        return obj

    def ok(self, req: TransportRequest, body: Dict[str, Any], obj: Dict[str, Any]) -> TransportResponse:
        obj = {"success": True, **obj}
        iv = body.get("init_iv")
        sess = self.sessions.get(body.get("session", "")) or {}
        enc_key = body.get("enc_key") or sess.get("enc_key")
        if iv and enc_key:
            return self.answer(req, 200, {"enc": encrypt(json.dumps(obj).encode(), enc_key, self.secret or "", iv)})
        return self.answer(req, 200, obj)

    # --- the transport -------------------------------------------------------------------------
    def __call__(self, req: TransportRequest) -> TransportResponse:
        body = json.loads(req.body.decode("utf-8"))
        with self.lock:
            self.requests.append(req)
            self.bodies.append(body)
            n = len(self.requests)
        if self.before is not None:
            self.before(req, n)
        path = req.url.split("/api/client/", 1)[1]
        res = self._check_signature(req)
        if res is None:
            custom = self.handlers.get(path)
            if custom is not None:
                res = custom(self, req, body)
            else:
                res = getattr(self, "_" + path.replace("/", "_"))(req, body)
        if self.after is not None:
            res = self.after(req, res)
        return res

    def _check_signature(self, req: TransportRequest) -> Optional[TransportResponse]:
        if not self.secret:
            return None
        from keywarden.crypto import canonical_request, request_signature

        ts = req.headers.get("X-Timestamp", "")
        n = req.headers.get("X-Nonce", "")
        path = "/api/client/" + req.url.split("/api/client/", 1)[1]
        good = request_signature(self.secret, canonical_request("POST", path, ts, n, req.body))
        fresh = ts.isdigit() and abs(int(ts) - (time.time() + self.shift)) <= 300
        if not fresh or not hmac.compare_digest(good, req.headers.get("X-Signature", "")):
            return self.fail(req, 401, "Invalid request signature")
        return None

    def _init(self, req: TransportRequest, body: Dict[str, Any]) -> TransportResponse:
        session = secrets.token_urlsafe(32)
        self.sessions[session] = {"enc_key": body.get("enc_key"), "activated": False}
        return self.ok(req, body, {"session": session, "app": {"name": "Fake App", "version": "1.0", "hwid_lock": True}})

    def _session(self, req: TransportRequest, body: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        return self.sessions.get(body.get("session", ""))

    def _license(self, req: TransportRequest, body: Dict[str, Any]) -> TransportResponse:
        s = self._session(req, body)
        if s is None:
            return self.fail(req, 401, "Invalid or expired session")
        k = self.keys.get(body.get("license", ""))
        if k is None:
            return self.fail(req, 400, "Invalid license key")
        if k["hwid"] is not None and k["hwid"] != body["hwid"]:
            return self.fail(req, 403, "HWID mismatch. Key locked to another device.")
        k["hwid"] = body["hwid"]
        s["activated"] = True
        s["key"] = body["license"]
        return self.ok(req, body, self.granted({
            "message": "License activated", "level": k["level"], "expires_at": self.expires_at,
            "entitlements": sorted(self.entitlements.get(body["license"], [])),
        }))

    def _trial(self, req: TransportRequest, body: Dict[str, Any]) -> TransportResponse:
        s = self._session(req, body)
        if s is None:
            return self.fail(req, 401, "Invalid or expired session")
        if self.trial_hours == 0:
            return self.fail(req, 403, "Trials are not enabled for this application.")
        hwid = body["hwid"].lower()
        if hwid in self.trials:
            return self.fail(req, 403, "Trial already used on this device.")
        key = "TRIAL-" + secrets.token_hex(6).upper()
        self.trials[hwid] = key
        self.keys[key] = {"hwid": hwid, "level": 1}
        s["activated"] = True
        s["key"] = key
        expires = iso(time.time() + self.shift + self.trial_hours * 3600)
        return self.ok(req, body, self.granted({"message": "Trial started", "level": 1, "expires_at": expires, "entitlements": [], "key": key}))

    def _offline(self, req: TransportRequest, body: Dict[str, Any]) -> TransportResponse:
        s = self._session(req, body)
        if s is None:
            return self.fail(req, 401, "Invalid or expired session")
        if self.offline_days == 0:
            return self.fail(req, 403, "Offline licenses are not enabled for this application.")
        if not s.get("activated"):
            return self.fail(req, 403, "Session not activated. Call /login, /register or /license first.")
        key = s.get("key", "")
        k = self.keys.get(key, {"hwid": body["hwid"], "level": 3})
        if k["hwid"] != body["hwid"].lower():
            return self.fail(req, 403, "HWID mismatch. Key locked to another device.")
        now = time.time() + self.shift
        f = license_file(self.key, {
            "v": 1, "kid": self.kid, "app_id": APP_ID, "license_id": "lic-" + key, "user": None, "hwid": k["hwid"], "level": k["level"],
            "entitlements": sorted(self.entitlements.get(key, [])), "expires_at": "2027-01-02T03:04:05.678Z", "issued_at": iso(now),
            "valid_until": iso(now + self.offline_days * 86400),
        })
        return self.ok(req, body, {"license_file": f})

    def _register(self, req: TransportRequest, body: Dict[str, Any]) -> TransportResponse:
        s = self._session(req, body)
        if s is None:
            return self.fail(req, 401, "Invalid or expired session")
        if body["license"] not in self.keys:
            return self.fail(req, 400, "Invalid license key")
        if body["username"] in self.users:
            return self.fail(req, 400, "Username already taken")
        ents = sorted(self.entitlements.get(body["license"], []))
        self.users[body["username"]] = {"password": body["password"], "level": self.keys[body["license"]]["level"], "entitlements": ents}
        s["activated"] = True
        user = {"username": body["username"], "level": 3, "expires_at": "2099-01-02T03:04:05.678Z"}
        return self.ok(req, body, self.granted({"message": "Registered", "user": user, "entitlements": ents}))

    def _login(self, req: TransportRequest, body: Dict[str, Any]) -> TransportResponse:
        s = self._session(req, body)
        if s is None:
            return self.fail(req, 401, "Invalid or expired session")
        u = self.users.get(body["username"])
        if u is None or u["password"] != body["password"]:
            return self.fail(req, 401, "Invalid username or password")
        s["activated"] = True
        user = {"username": body["username"], "level": u["level"], "expires_at": None}
        return self.ok(req, body, self.granted({"message": "Logged in", "user": user, "entitlements": u.get("entitlements", [])}))

    def _heartbeat_start(self, req: TransportRequest, body: Dict[str, Any]) -> TransportResponse:
        session = body.get("session", "")
        s = self.sessions.get(session)
        if s is None:
            return self.fail(req, 401, "Invalid or expired session")
        if not s["activated"]:
            return self.fail(req, 403, "Session not activated. Call /login, /register or /license first.")
        if session in self.heartbeats:
            return self.fail(req, 409, "heartbeat session already exists for this nonce")
        token = "TT" + secrets.token_hex(16)
        self.heartbeats[session] = {"token": token, "system_id": body["system_id"], "last": 0, "count": 0}
        return self.ok(req, body, self.granted({"token": token, "beat_interval": self.beat_interval, "proof": start_proof(session, body["system_id"], token)}))

    def _heartbeat(self, req: TransportRequest, body: Dict[str, Any]) -> TransportResponse:
        session = body.get("session", "")
        hb = self.heartbeats.get(session)
        if hb is None:
            return self.fail(req, 403, "rejected")
        if body.get("debugger_detected") is True or body.get("system_id") != hb["system_id"]:
            del self.heartbeats[session]
            return self.fail(req, 403, "rejected")
        if not hmac.compare_digest(body.get("token", ""), hb["token"]) or body["beat_index"] <= hb["last"]:
            return self.fail(req, 403, "rejected")
        if self.enforce_expiry and time.time() + self.shift >= parse_iso(self.expires_at):
            return self.fail(req, 403, "rejected")
        previous = hb["token"]
        hb["token"] = "TT" + secrets.token_hex(16)
        hb["last"] = body["beat_index"]
        hb["count"] += 1
        proof = beat_proof(previous, session, body["beat_index"], hb["token"], hb["count"])
        return self.ok(req, body, self.granted({"new_token": hb["token"], "beat_count": hb["count"], "proof": proof}))

    def _heartbeat_stop(self, req: TransportRequest, body: Dict[str, Any]) -> TransportResponse:
        session = body.get("session", "")
        hb = self.heartbeats.get(session)
        if hb is None or hb["token"] != body.get("token"):
            return self.fail(req, 401, "Invalid heartbeat token")
        self.stopped.append(self.heartbeats.pop(session))
        return self.ok(req, body, {})


def not_sent(message: str = "connection refused") -> TransportError:
    return TransportError("network", False, message)


class Collector:
    """Thread-safe event collector with waiting (no sleeps: waits on a condition)."""

    def __init__(self) -> None:
        self.items: List[Any] = []
        self.cond = threading.Condition()

    def __call__(self, item: Any) -> None:
        with self.cond:
            self.items.append(item)
            self.cond.notify_all()

    def wait_for(self, n: int, timeout: float = 10.0) -> List[Any]:
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.items) >= n, timeout):
                raise AssertionError(f"expected {n} events within {timeout} s, got {self.items!r}")
            return list(self.items[:n])
