"""Air-gapped machines: activation requests answered by file, and seat pools served by a relay on
the customer's own network (the server's docs/air-gapped.md; vectors: sdk/vectors/airgap.json).

Activation request: ``"kwreq1." base64url(UTF-8 JSON {"v": 1, "app_id", "key", "hwid", "components"?,
"nonce", "created_at"})``, written with no network. The nonce (16 random bytes) stays in a small
JSON file; the answer is an offline license file (``kwlic1``) whose payload carries
``request_nonce``. It is accepted only when it passes every offline-file check and that nonce is
the one of this machine's latest request (else ``offline_invalid``/``wrong_request``).

Seat pool: ``"kwpool1." base64url(PAYLOAD) "." base64url(Ed25519 over the part before the second
dot)``, signed by a pinned response key. A relay hands it out with every lease; the SDK believes
a lease only when its pool verifies, names this application and is still valid.
"""
from __future__ import annotations

import atexit
import base64
import json
import os
import secrets
import threading
import weakref
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Tuple
from urllib.parse import quote

from .codes import ErrorCode, OfflineReason
from .crypto import ed25519_verify_bytes
from .errors import KeywardenError, offline_error
from .offline import _b64url, _grant_fields, _integer, _open, _text, write_json_atomically  # noqa: PLC2701
from .transport import Transport, TransportError, TransportRequest
from .utc import datetime_from_ms, parse_utc_ms
from .verify import PinnedKeys

__all__ = [
    "build_request", "RequestStore", "check_request_nonce", "SeatPool", "verify_pool", "SeatLease", "RelayClient",
    "NO_SEATS",
]

_POOL_TAG = "kwpool1"
NO_SEATS = "No seats available"


def _b64url_encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _iso(seconds: float) -> str:
    ms = int(seconds * 1000)
    return datetime_from_ms(ms).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def build_request(
    app_id: str, key: str, hwid: str, nonce: str, created_at: str, components: Optional[Mapping[str, str]] = None
) -> str:
    """The request text for these values (the nonce and time are the caller's: see RequestStore)."""
    body: Dict[str, Any] = {"v": 1, "app_id": app_id, "key": key, "hwid": hwid}
    if components:
        body["components"] = dict(components)
    body["nonce"] = nonce
    body["created_at"] = created_at
    raw = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return "kwreq1." + _b64url_encode(raw)


class RequestStore:
    """The nonce of this machine's latest activation request, in ``{"v": 1, "nonce", "created_at"}``
    (written atomically). A new request replaces it, so an answer to an older one is refused."""

    def __init__(self, path: "os.PathLike[str] | str") -> None:
        self.path = Path(path)

    def new_request(
        self, app_id: str, key: str, hwid: str, now: float, components: Optional[Mapping[str, str]] = None
    ) -> str:
        nonce = _b64url_encode(secrets.token_bytes(16))
        created = _iso(now)
        write_json_atomically(self.path, {"v": 1, "nonce": nonce, "created_at": created})
        return build_request(app_id, key, hwid, nonce, created, components)

    def nonce(self) -> Optional[str]:
        """The kept nonce, None when there is none (or the file is damaged)."""
        try:
            with open(self.path, "rb") as f:
                v = json.loads(f.read(4096).decode("utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            return None
        n = v.get("nonce") if isinstance(v, dict) else None
        return n if isinstance(n, str) and n else None


def check_request_nonce(file: str, nonce: Optional[str]) -> None:
    """After the offline-file checks passed: ``request_nonce`` must be ``nonce`` (else wrong_request)."""
    raw = _b64url(file.strip(" \t\r\n").split(".")[1])
    p = json.loads(raw.decode("utf-8")) if raw is not None else {}
    got = p.get("request_nonce") if isinstance(p, dict) else None
    if nonce is None:
        raise offline_error(OfflineReason.WRONG_REQUEST, "no activation request is kept on this machine")
    if not isinstance(got, str) or not secrets.compare_digest(got.encode("utf-8"), nonce.encode("utf-8")):
        raise offline_error(OfflineReason.WRONG_REQUEST, "not the answer to this machine's latest activation request")


@dataclass(frozen=True)
class SeatPool:
    """A verified seat pool: what the relay's license grants and until when."""

    app_id: str
    license_id: str
    relay_id: str
    seats: int
    level: int
    entitlements: Tuple[str, ...]
    expires_at: Optional[datetime]
    valid_until: datetime
    issued_at: datetime
    kid: str


def verify_pool(pool: object, keys: PinnedKeys, app_id: str, now: float) -> SeatPool:
    """Checks a POOL in the order of sdk/vectors/airgap.json: malformed, unknown_kid, bad_signature,
    wrong_app, expired. Raises ``offline_invalid`` with an OfflineReason."""
    signed, sig, p = _open(pool, _POOL_TAG)
    good = (
        _grant_fields(p) and all(_text(p, k) for k in ("kid", "app_id", "license_id", "relay_id"))
        and _integer(p.get("seats")) and p["seats"] >= 1
    )
    if not good:
        raise offline_error(OfflineReason.MALFORMED, "pool payload lacks a field or has one of the wrong type")
    key = keys.get(p["kid"])
    if key is None:
        raise offline_error(OfflineReason.UNKNOWN_KID, f"pool signed under key {p['kid']!r}, which this SDK does not pin")
    if not ed25519_verify_bytes(key, signed.encode("ascii"), sig):
        raise offline_error(OfflineReason.BAD_SIGNATURE, "the pool's signature does not verify")
    if p["app_id"] != app_id:
        raise offline_error(OfflineReason.WRONG_APP, f"pool issued for application {p['app_id']!r}")
    until = parse_utc_ms(p["valid_until"])
    assert until is not None
    if now * 1000 >= until:
        raise offline_error(OfflineReason.EXPIRED, f"pool valid until {p['valid_until']}")
    expires = parse_utc_ms(p["expires_at"])
    issued = parse_utc_ms(p["issued_at"])
    assert issued is not None
    return SeatPool(
        app_id=p["app_id"], license_id=p["license_id"], relay_id=p["relay_id"], seats=p["seats"], level=p["level"],
        entitlements=tuple(sorted(set(p["entitlements"]))),
        expires_at=datetime_from_ms(expires) if expires is not None else None,
        valid_until=datetime_from_ms(until), issued_at=datetime_from_ms(issued), kid=p["kid"],
    )


class RelayClient:
    """HTTP calls to a relay (``POST/PUT/DELETE /relay/v1/leases``). Every lease answer is believed
    only when its pool verifies under the pinned keys and names this application."""

    def __init__(
        self, relay_url: str, keys: PinnedKeys, app_id: str, transport: Transport, timeout: float,
        clock: Callable[[], float],
    ) -> None:
        self.base = relay_url.rstrip("/")
        self._keys, self._app_id, self._transport = keys, app_id, transport
        self._timeout, self._clock = timeout, clock

    def _send(self, method: str, path: str, body: Optional[Mapping[str, Any]] = None) -> Tuple[int, Any]:
        data = json.dumps(body).encode("utf-8") if body is not None else b""
        headers = {"Content-Type": "application/json"} if body is not None else {}
        try:
            res = self._transport(TransportRequest(method, self.base + path, headers, data, self._timeout))
        except TransportError as e:
            code = ErrorCode.TIMEOUT if e.kind == "timeout" else ErrorCode.NETWORK
            raise KeywardenError(code, f"relay {self.base}: {e}", not_sent=not e.sent) from None
        except Exception as e:  # noqa: BLE001 - a custom transport's own failure
            raise KeywardenError(ErrorCode.NETWORK, f"relay {self.base}: {e}") from None
        try:
            parsed: Any = json.loads(res.body.decode("utf-8")) if res.body else None
        except (UnicodeDecodeError, ValueError):
            parsed = None
        return res.status, parsed

    def _refused(self, status: int, parsed: Any) -> KeywardenError:
        detail = parsed.get("detail") if isinstance(parsed, dict) else None
        if status == 409 and detail == NO_SEATS:
            return KeywardenError(ErrorCode.SESSION_LIMIT, f"session_limit: relay has {NO_SEATS}", status=status,
                                  detail=detail)
        return KeywardenError(ErrorCode.SERVER, f"server: relay answered {status} {detail}", status=status, detail=detail)

    def _lease(self, hwid: str, status: int, parsed: Any, expect: int) -> Tuple[str, float, SeatPool]:
        if status != expect:
            raise self._refused(status, parsed)
        p = parsed if isinstance(parsed, dict) else {}
        pool = verify_pool(p.get("pool"), self._keys, self._app_id, self._clock())
        lease_id, expires = p.get("lease_id"), parse_utc_ms(p.get("expires_at"))
        if not isinstance(lease_id, str) or not lease_id or expires is None or p.get("hwid") != hwid.lower():
            raise offline_error(OfflineReason.MALFORMED, "relay lease lacks lease_id or expires_at, or names another hwid")
        return lease_id, expires / 1000, pool

    def lease(self, hwid: str) -> Tuple[str, float, SeatPool]:
        status, parsed = self._send("POST", "/relay/v1/leases", {"hwid": hwid})
        return self._lease(hwid, status, parsed, 201)

    def renew(self, lease_id: str, hwid: str) -> Optional[Tuple[str, float, SeatPool]]:
        """The renewed lease, or None when the relay no longer knows it (404: expired)."""
        status, parsed = self._send("PUT", "/relay/v1/leases/" + quote(lease_id, safe=""))
        if status == 404:
            return None
        return self._lease(hwid, status, parsed, 200)

    def release(self, lease_id: str) -> None:
        status, parsed = self._send("DELETE", "/relay/v1/leases/" + quote(lease_id, safe=""))
        if status not in (204, 404):
            raise self._refused(status, parsed)


_live: "weakref.WeakSet[SeatLease]" = weakref.WeakSet()


@atexit.register
def _release_all() -> None:
    for lease in list(_live):
        lease.release()


class SeatLease:
    """A seat leased from a relay and kept renewed by a daemon thread until :meth:`release` (also
    called by ``with``, and at interpreter exit). ``on_lost(error)`` is called once when the seat
    can no longer be kept (the relay forgot it and has none free, or its lease ran out unreachable)."""

    def __init__(
        self, relay: RelayClient, hwid: str, log: Any, clock: Callable[[], float],
        on_lost: Optional[Callable[[KeywardenError], None]] = None,
    ) -> None:
        self._relay, self.hwid, self._log, self._clock, self._on_lost = relay, hwid, log, clock, on_lost
        self.lease_id, self._expires, self.pool = relay.lease(hwid)
        self.renewals = 0
        self.lost: Optional[KeywardenError] = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="keywarden-relay-lease", daemon=True)
        self._thread.start()
        _live.add(self)

    @property
    def expires_at(self) -> datetime:
        return datetime_from_ms(int(self._expires * 1000))

    @property
    def active(self) -> bool:
        """True while the lease is held and not past its expiry."""
        return self.lost is None and not self._stop.is_set() and self._clock() < self._expires

    def renew(self) -> None:
        """Renews now (the thread does this at half the remaining time); a lease the relay forgot is
        taken again. Raises like lease()."""
        with self._lock:
            got = self._relay.renew(self.lease_id, self.hwid)
            if got is None:
                self._log.info("keywarden.relay.lease_gone: %s, leasing again", self.lease_id)
                got = self._relay.lease(self.hwid)
            self.lease_id, self._expires, self.pool = got
            self.renewals += 1

    def _run(self) -> None:
        while not self._stop.wait(max(1.0, (self._expires - self._clock()) / 2)):
            try:
                self.renew()
            except KeywardenError as e:
                retry = e.code in (ErrorCode.NETWORK, ErrorCode.TIMEOUT, ErrorCode.SERVER)
                if retry and self._clock() < self._expires:
                    self._log.warning("keywarden.relay.renew_failed: %s", e.message)
                    continue
                self.lost = e
                self._log.warning("keywarden.relay.lease_lost: %s", e.message)
                if self._on_lost is not None:
                    self._on_lost(e)
                return

    def release(self) -> None:
        """Gives the seat back (DELETE); never raises (a relay that cannot be reached lets it expire)."""
        if self._stop.is_set():
            return
        self._stop.set()
        _live.discard(self)
        with self._lock:
            try:
                self._relay.release(self.lease_id)
            except KeywardenError as e:
                self._log.warning("keywarden.relay.release_failed: %s", e.message)

    def __enter__(self) -> "SeatLease":
        return self

    def __exit__(self, *_: object) -> None:
        self.release()
