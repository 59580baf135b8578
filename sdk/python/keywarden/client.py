"""The synchronous Keywarden client.

Every call carries a fresh nonce (and an HMAC when the config holds a secret), and every answer
is verified against the pinned keys before a byte of it is believed (docs/protocol.md 3-5). Failures are
KeywardenErrors; nothing here exits the process or lets an untyped exception reach the host
program from a network call.
"""
from __future__ import annotations

import json
import logging
import os
import secrets
import sys
import threading
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, Union, cast

from .codes import ErrorCode, VerificationReason
from .config import Config, ConfigError, load_config, parse_config
from .crypto import canonical_request, decrypt_response, proof_equals, request_signature, start_proof
from .errors import KeywardenError, error_from_answer, verification_error
from .licensing import LicensingModels, entitlements_of
from .machine import machine_hwid, self_hash
from .models import (
    Activation, AppInfo, ClientOptions, HeartbeatStart, LicenseActivation, LicenseInfo, LoggerLike, LoginActivation,
    OptionsArg, TrialInfo, UserInfo, parse_options,
)
from .transport import DefaultTransport, Transport, TransportError, TransportRequest
from .updates import Artifact, ProgressCallback, UpdateOffer, download_artifact, parse_offer
from .verify import SignedAnswer, pin_keys, verify_response

if TYPE_CHECKING:  # pragma: no cover
    from .channel import ChannelContext, ChannelLink
    from .heartbeat import Heartbeat, Listener

__all__ = [
    "Client",
    "ClientOptions",
    "AppInfo",
    "UserInfo",
    "LicenseInfo",
    "TrialInfo",
    "HeartbeatStart",
    "LoginActivation",
    "LicenseActivation",
    "LoggerLike",
]

WINDOW_SECONDS = 300
CLIENT_PATH = "/api/client/"
# A signed request refused with "Invalid request signature" is retried once when the (verified)
# refusal just taught a clock offset larger than this.
_RETRYABLE_OFFSET_SECONDS = 60
# What a reverse proxy answers, unsigned, when the service behind it is down or slow.
_GATEWAY_STATUSES = (502, 503, 504)
_SIGNATURE_HEADERS = ("x-response-kid", "x-response-timestamp", "x-response-signature")


def _int(v: object) -> Optional[int]:
    """v when it is a JSON integer (bool is an int subclass in Python: refused)."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _obj(v: object) -> Optional[Dict[str, Any]]:
    return cast(Dict[str, Any], v) if isinstance(v, dict) else None


def _to_datetime(v: Any) -> Optional[datetime]:
    if not isinstance(v, str) or not v:
        return None
    text = v[:-1] + "+00:00" if v.endswith(("Z", "z")) else v
    try:
        d = datetime.fromisoformat(text)
    except ValueError:
        return None
    return d.replace(tzinfo=timezone.utc) if d.tzinfo is None else d.astimezone(timezone.utc)


def _nonce() -> str:
    return secrets.token_urlsafe(18)  # 24 characters of [A-Za-z0-9_-]


class _ClockSkew(KeywardenError):
    """A clock_skew refusal that taught an offset worth one retry (internal)."""


class Client(LicensingModels):
    """A Keywarden client for one application. Thread-safe for use by one host thread plus the
    heartbeat's thread; one session at a time (``init`` replaces it). The licensing models of
    docs/protocol.md 12 (trial, entitlements, offline files, grace) come from :class:`LicensingModels`."""

    def __init__(self, config: Union[Config, Mapping[str, Any]], options: OptionsArg = None, **kwargs: Any) -> None:
        o = parse_options(options, kwargs)
        self.config: Config = parse_config(config)
        self.options = o
        self.base_url: str = (o.base_url or self.config.base_url).rstrip("/")
        if o.timeout <= 0:
            raise ConfigError("timeout must be positive")
        if o.retries < 0:
            raise ConfigError("retries must be >= 0")
        self.timeout = float(o.timeout)
        self.retries = int(o.retries)
        self.log: LoggerLike = o.logger if o.logger is not None else logging.getLogger("keywarden")
        self.clock: Callable[[], float] = o.clock or time.time
        try:
            self._transport: Transport = o.transport or DefaultTransport(proxy=o.proxy, max_response_bytes=o.max_response_bytes)
        except ValueError as e:
            raise ConfigError(str(e)) from e
        self._enc_key = o.enc_key
        if self._enc_key and not self.config.api_secret:
            raise ConfigError("enc_key needs the api_secret of the config (docs/protocol.md 5 keys the cipher with it)")
        self._max_offset = float(o.max_clock_offset)
        try:
            self._keys = pin_keys(self.config.response_keys)
        except ValueError as e:
            raise ConfigError(f"keywarden config: a response key is not a valid Ed25519 key: {e}") from e
        self._lock = threading.Lock()
        self._offset: Optional[float] = None
        self._session: Optional[str] = None
        # The worker owning this session as the last answer named it (X-Keywarden-Route): sent back on
        # every call so a balancer routing on it reaches that worker. Trusted for nothing else. Dropped
        # after a connection error, a timeout or a 502/503/504: the worker it names may be gone.
        self._route: Optional[str] = None
        self._init_args: Dict[str, Optional[str]] = {}
        self.last_activation: Optional[Activation] = None
        """The last successful activation, repeated by a heartbeat's re-authentication."""
        self._init_models()

    @classmethod
    def from_config(
        cls, config: Union[Config, Mapping[str, Any], str, "os.PathLike[str]"], options: OptionsArg = None, **kwargs: Any
    ) -> "Client":
        """A client from keywarden.json (a path) or its parsed content (a dict)."""
        if isinstance(config, (str, os.PathLike)):
            return cls(load_config(config), options, **kwargs)
        return cls(config, options, **kwargs)

    # --- state -------------------------------------------------------------------------------
    @property
    def session(self) -> Optional[str]:
        """The session from ``init``, if any."""
        return self._session

    @property
    def clock_offset(self) -> Optional[float]:
        """Server time minus local time (s), once learned from the first verified answer."""
        return self._offset

    def server_now(self) -> float:
        """The local clock corrected by the learned offset (unix seconds)."""
        return self.clock() + (self._offset or 0.0)

    def machine_hwid(self) -> str:
        """Salted machine id for this application (the api_key is the salt)."""
        return machine_hwid(self.config.api_key)

    @staticmethod
    def self_hash(file: Optional[str] = None) -> str:
        """SHA-256 hex of the running program (or of ``file``)."""
        return self_hash(file)

    # --- the client API ----------------------------------------------------------------------
    def init(
        self, binary_hash: Optional[str] = None, binary_token: Optional[str] = None, binary_token_hash: Optional[str] = None
    ) -> AppInfo:
        """Opens a session; returns the application's info."""
        self._init_args = {"binary_hash": binary_hash, "binary_token": binary_token, "binary_token_hash": binary_token_hash}
        body: Dict[str, Any] = {"api_key": self.config.api_key, "version": self.config.version or "1.0"}
        if self._enc_key:
            body["enc_key"] = self._enc_key
        if binary_hash:
            body["binary_hash"] = binary_hash
        if binary_token is not None:
            body["binary_token"] = binary_token
            if binary_token_hash is not None:
                body["binary_token_hash"] = binary_token_hash
        self._route = None  # a new session lives wherever init lands
        r = self.call("init", body)
        app = _obj(r.get("app"))
        session = r.get("session")
        if not isinstance(session, str) or not session or app is None or not isinstance(app.get("name"), str):
            raise verification_error(VerificationReason.MALFORMED, "init answer lacks session or app")
        with self._lock:
            self._session = session
        version = app.get("version")
        return AppInfo(name=app["name"], version=str(version) if version is not None else "", hwid_lock=app.get("hwid_lock") is True, session=session)

    def register(self, username: str, password: str, license: str, hwid: Optional[str] = None) -> UserInfo:
        """Registers, then logs in at once and ignores that login's failure (as reference
        clients do since 1.1)."""
        h = hwid if hwid is not None else self.machine_hwid()
        r = self.call(
            "register", {"session": self._require_session(), "username": username, "password": password, "license": license, "hwid": h}
        )
        user = self._user(r)
        self._activated(r)
        try:
            self.login(username, password, h)
        except KeywardenError as e:
            self.log.warning("keywarden.register.login_failed: %s", e.message)
        self.last_activation = LoginActivation(username, password, h)
        return user

    def login(self, username: str, password: str, hwid: Optional[str] = None) -> UserInfo:
        h = hwid if hwid is not None else self.machine_hwid()
        r = self.call("login", {"session": self._require_session(), "username": username, "password": password, "hwid": h})
        user = self._user(r)
        self._activated(r)
        self.last_activation = LoginActivation(username, password, h)
        return user

    def activate_license(self, key: str, hwid: Optional[str] = None) -> LicenseInfo:
        """License-only activation; ``hwid`` defaults to :meth:`machine_hwid`."""
        h = hwid if hwid is not None else self.machine_hwid()
        r = self.call("license", {"session": self._require_session(), "license": key, "hwid": h})
        level = _int(r.get("level"))
        if level is None:
            raise verification_error(VerificationReason.MALFORMED, "license answer lacks level")
        ents = self._activated(r)
        self.last_activation = LicenseActivation(key, h)
        return LicenseInfo(level=level, expires_at=_to_datetime(r.get("expires_at")), message=str(r.get("message") or ""), entitlements=ents)

    def start_heartbeat(
        self,
        system_id: Optional[str] = None,
        code_hash: Optional[str] = None,
        *,
        interval: Optional[float] = None,
        code_size: Optional[int] = None,
        debugger_detected: Optional[Callable[[], bool]] = None,
        reauth: Union[bool, Callable[["Client"], None], None] = None,
        channel: str = "auto",
        compromised_after: int = 5,
        on_beat: Optional["Listener"] = None,
        on_degraded: Optional["Listener"] = None,
        on_compromised: Optional["Listener"] = None,
        on_recovered: Optional["Listener"] = None,
        on_killed: Optional["Listener"] = None,
        on_stopped: Optional["Listener"] = None,
        on_offline: Optional["Listener"] = None,
        on_grace_expired: Optional["Listener"] = None,
        on_expired: Optional["Listener"] = None,
    ) -> "Heartbeat":
        """Opens a heartbeat session (its proof checked) and beats on a daemon thread until
        stopped or killed. ``system_id`` defaults to the machine hwid, ``code_hash`` to
        :meth:`self_hash`. Listeners given here are attached before the first beat."""
        hb = self.prepare_heartbeat(
            system_id, code_hash, interval=interval, code_size=code_size, debugger_detected=debugger_detected, reauth=reauth,
            channel=channel, compromised_after=compromised_after,
        )
        for event, cb in (
            ("beat", on_beat), ("degraded", on_degraded), ("compromised", on_compromised), ("recovered", on_recovered),
            ("killed", on_killed), ("stopped", on_stopped), ("offline", on_offline), ("grace_expired", on_grace_expired),
            ("expired", on_expired),
        ):
            if cb is not None:
                hb.on(event, cb)
        hb.start()
        return hb

    def prepare_heartbeat(
        self,
        system_id: Optional[str] = None,
        code_hash: Optional[str] = None,
        *,
        interval: Optional[float] = None,
        code_size: Optional[int] = None,
        debugger_detected: Optional[Callable[[], bool]] = None,
        reauth: Union[bool, Callable[["Client"], None], None] = None,
        channel: str = "auto",
        compromised_after: int = 5,
    ) -> "Heartbeat":
        """Like :meth:`start_heartbeat` (heartbeat/start is called and its proof checked) but the
        beating thread is not started: attach listeners, then call ``hb.start()``.

        ``channel``: "auto" uses the realtime channel when the server offers it (and the client
        uses the default transport, no proxy); "off" beats over REST only. ``compromised_after``:
        verification failures in a row after which ``compromised`` is emitted (default 5)."""
        from .channel import ChannelLink
        from .heartbeat import Heartbeat

        if channel not in ("auto", "off"):
            raise ConfigError('channel must be "auto" or "off"')

        sys_id = system_id if system_id is not None else self.machine_hwid()
        code = code_hash
        if code is None:
            try:
                code = self_hash()
            except OSError:
                code = self_hash(sys.executable)
        use_channel = channel == "auto" and self.options.transport is None and self.options.proxy is None
        link = ChannelLink(self.channel_context(), self._require_session()) if use_channel else None
        try:
            started = self.open_heartbeat(sys_id, link)
        except BaseException:
            if link is not None:
                link.close()
            raise
        return Heartbeat(
            self, sys_id, code, started,
            interval=interval, code_size=code_size, debugger_detected=debugger_detected, reauth=reauth, link=link,
            compromised_after=compromised_after,
        )

    def channel_context(self) -> "ChannelContext":
        """What the realtime channel needs of this client (internal)."""
        from .channel import ChannelContext

        return ChannelContext(
            base_url=self.base_url, version=self.config.version or "1.0", api_secret=self.config.api_secret,
            timeout=self.timeout, open_timeout=min(self.timeout, 5.0), keys=self._keys, server_now=self.server_now, log=self.log,
            route=lambda: self._route,
        )

    def open_heartbeat(self, system_id: str, link: Optional["ChannelLink"] = None) -> HeartbeatStart:
        """heartbeat/start (on the channel when ``link`` opens, else REST) with the proof checked
        before the token is trusted."""
        session = self._require_session()
        r: Optional[Dict[str, Any]] = None
        if link is not None and link.rebind(session):
            try:
                r = link.call("heartbeat/start", {"system_id": system_id})
            except KeywardenError as e:
                if not e.not_sent:
                    raise
        if r is None:
            r = self.call("heartbeat/start", {"session": session, "system_id": system_id})
        token = r.get("token")
        interval = _int(r.get("beat_interval"))
        if not isinstance(token, str) or interval is None:
            raise verification_error(VerificationReason.MALFORMED, "heartbeat/start answer lacks token")
        if not proof_equals(r.get("proof"), start_proof(session, system_id, token)):
            raise verification_error(VerificationReason.BAD_PROOF, "heartbeat/start proof does not verify")
        self._grace.note(r)
        return HeartbeatStart(session=session, token=token, beat_interval=interval)

    def reauthenticate(self) -> None:
        """init + the remembered activation, for a heartbeat whose state was lost."""
        a = self.last_activation
        if a is None:
            raise KeywardenError(ErrorCode.SESSION_EXPIRED, "nothing to re-authenticate with: no login or license succeeded on this client")
        self.init(**self._init_args)
        if isinstance(a, LoginActivation):
            self.login(a.username, a.password, a.hwid)
        else:
            self.activate_license(a.key, a.hwid)

    # --- updates (the server's docs/releases.md) ------------------------------------------------
    def check_update(
        self, version: str, channel: str = "stable", platform: str = "any", arch: str = "any"
    ) -> Optional[UpdateOffer]:
        """Asks for the newest release above ``version`` this activated key may install on
        ``platform``/``arch`` (channel ``stable`` < ``rc`` < ``beta`` < ``alpha`` < ``dev``: a channel is
        offered itself and everything more stable). Returns None, or the offer whose every artifact's
        signature verified under the pinned keys (else an :class:`UpdateError`)."""
        app_id = self._require_app_id()
        r = self.call(
            "releases/upgrade",
            {"session": self._require_session(), "version": version, "channel": channel, "platform": platform, "arch": arch},
        )
        upgrade = r.get("upgrade")
        if upgrade is None:
            return None
        if not isinstance(upgrade, dict):
            raise verification_error(VerificationReason.MALFORMED, "upgrade answer is not an object")
        try:
            return parse_offer(upgrade, app_id, self._keys, _to_datetime)
        except ValueError as e:
            raise verification_error(VerificationReason.MALFORMED, str(e)) from None

    def download_update(
        self, artifact: Artifact, target_path: "os.PathLike[str] | str", progress: Optional[ProgressCallback] = None
    ) -> str:
        """Downloads ``artifact`` to ``target_path``: streamed into a temporary file in the same folder
        (``progress(received, total)`` after each chunk), checked for size, SHA-512 and signature, then
        renamed over the target. Any failure removes the temporary file, leaves the target untouched and
        raises :class:`UpdateError`. The client's ``timeout`` bounds each connect and read, not the whole
        download. Returns the target's absolute path."""
        transport = self._transport if isinstance(self._transport, DefaultTransport) else DefaultTransport()
        return download_artifact(self._keys, artifact, target_path, progress, transport, self.timeout)

    def _require_app_id(self) -> str:
        if not self.config.app_id:
            raise ConfigError("keywarden config: app_id missing (release artifacts are signed for it)")
        return self.config.app_id

    # --- the wire ----------------------------------------------------------------------------
    def _require_session(self) -> str:
        s = self._session
        if not s:
            raise KeywardenError(ErrorCode.SESSION_EXPIRED, "call init() first")
        return s

    def _user(self, r: Mapping[str, Any]) -> UserInfo:
        u = _obj(r.get("user"))
        level = _int(u.get("level")) if u is not None else None
        if u is None or not isinstance(u.get("username"), str) or level is None:
            raise verification_error(VerificationReason.MALFORMED, "answer lacks user")
        return UserInfo(
            username=u["username"], level=level, expires_at=_to_datetime(u.get("expires_at")), message=str(r.get("message") or ""),
            entitlements=entitlements_of(r),
        )

    def call(self, endpoint: str, body: Mapping[str, Any]) -> Dict[str, Any]:
        """One verified client call (``endpoint`` like ``"license"``); returns the answer object.

        Sends again (fresh nonce, same body) only when the request certainly never reached the
        server, or once after the server refused our request signature while our clock was off
        (learned from that same signed answer).
        """
        attempt = 0
        clock_retried = False
        while True:
            try:
                return self._once(endpoint, body)
            except _ClockSkew as e:
                if clock_retried:
                    raise KeywardenError(e.code, e.message, status=e.status, detail=e.detail) from None
                clock_retried = True
                self.log.info("keywarden.call.clock_retry: %s", endpoint)
            except KeywardenError as e:
                if e.not_sent and attempt < self.retries:
                    attempt += 1
                    self.log.debug("keywarden.call.retry: %s attempt %d: %s", endpoint, attempt, e.message)
                    time.sleep(min(2.0, 0.1 * 2 ** attempt))
                    continue
                raise

    def _once(self, endpoint: str, body: Mapping[str, Any]) -> Dict[str, Any]:
        path = CLIENT_PATH + endpoint
        init_iv = secrets.token_urlsafe(16) if self._enc_key else None
        payload = dict(body)
        if init_iv:
            payload["init_iv"] = init_iv
        # ensure_ascii: a lone surrogate in a caller's string (surrogateescape'd argv) still encodes.
        raw = json.dumps(payload, separators=(",", ":")).encode("utf-8")
        n = _nonce()
        headers = {"Content-Type": "application/json", "Accept": "application/json", "X-Nonce": n}
        route = self._route
        if route:
            headers["X-Keywarden-Route"] = route
        if self.config.api_secret:
            ts = str(int(self.server_now()))
            headers["X-Timestamp"] = ts
            headers["X-Signature"] = request_signature(self.config.api_secret, canonical_request("POST", path, ts, n, raw))
        req = TransportRequest(method="POST", url=self.base_url + path, headers=headers, body=raw, timeout=self.timeout)
        try:
            res = self._transport(req)
            status = int(res.status)
            res_body = bytes(res.body)
            res_headers = {str(k).lower(): str(v) for k, v in dict(res.headers).items()}
        except TransportError as e:
            self._route = None  # the worker it names may be gone: let the balancer pick a live one
            kind = ErrorCode.TIMEOUT if e.kind == "timeout" else ErrorCode.NETWORK
            raise KeywardenError(kind, f"{kind.value} on {path}: {e}", not_sent=not e.sent) from e
        except Exception as e:  # noqa: BLE001 - a custom transport's own failure
            self._route = None
            raise KeywardenError(ErrorCode.NETWORK, f"network on {path}: {type(e).__name__}: {e}") from e
        if status in _GATEWAY_STATUSES:
            # Signed or not (a balancer's own answer is not), the worker the route names may be gone.
            # Dropping a hint is all a forged answer could achieve: the next call is forwarded once.
            self._route = None
        if status in _GATEWAY_STATUSES and not any(h in res_headers for h in _SIGNATURE_HEADERS):
            # A proxy in front saying the service is unreachable: believed for nothing, but not an
            # attack either (whoever could forge it could as well cut the connection).
            raise KeywardenError(ErrorCode.SERVER, f"server: {status} from a gateway (unsigned) on {path}", status=status)
        had_offset = self._offset is not None
        self._verify(path, status, res_headers, res_body, n)
        if res_headers.get("x-keywarden-route") and status not in _GATEWAY_STATUSES:
            self._route = res_headers["x-keywarden-route"]
        parsed = self._parse(res_body, path, status)
        if status != 200:
            self._note_refusal(status)
            err = error_from_answer(status, parsed.get("detail"), res_headers.get("retry-after"))
            # Our timestamp was refused and this signed answer just taught us the server's clock.
            if err.code is ErrorCode.CLOCK_SKEW and self.config.api_secret and not had_offset and abs(self._offset or 0) > _RETRYABLE_OFFSET_SECONDS:
                raise _ClockSkew(err.code, err.message, status=err.status, detail=err.detail)
            raise err
        if "enc" in parsed and isinstance(parsed.get("enc"), str) and init_iv and self._enc_key:
            try:
                plain = decrypt_response(parsed["enc"], self._enc_key, self.config.api_secret or "", init_iv)
            except ValueError:
                raise verification_error(VerificationReason.MALFORMED, f"encrypted answer of {path} does not decrypt") from None
            parsed = self._parse(plain, path, status)
        if parsed.get("success") is not True:
            raise verification_error(VerificationReason.MALFORMED, f"answer of {path} lacks success: true")
        return parsed

    @staticmethod
    def _parse(raw: bytes, path: str, status: int) -> Dict[str, Any]:
        try:
            v: object = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError):
            raise verification_error(VerificationReason.MALFORMED, f"answer of {path} ({status}) is not JSON") from None
        obj = _obj(v)
        if obj is None:
            raise verification_error(VerificationReason.MALFORMED, f"answer of {path} ({status}) is not a JSON object")
        return obj

    def _verify(self, path: str, status: int, headers: Mapping[str, str], body: bytes, nonce: str) -> None:
        # Before the offset is known a larger distance is allowed: the answer is bound to this
        # request's fresh nonce, so it cannot be an old one replayed. Afterwards: 300 s around
        # server time.
        limit = self._max_offset if self._offset is None else WINDOW_SECONDS
        answer = SignedAnswer(method="POST", path=path, status=status, headers=headers, body=body, nonce=nonce)
        server_ts = verify_response(self._keys, answer, self.server_now(), limit)
        with self._lock:
            if self._offset is None:
                self._offset = server_ts - self.clock()
                if abs(self._offset) > 5:
                    self.log.info("keywarden.clock.offset: %.1f s", self._offset)
