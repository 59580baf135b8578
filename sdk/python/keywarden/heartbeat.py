"""A running heartbeat (docs/protocol.md 6, docs/spec.md "Heartbeat rules") on a daemon thread.

Events (listeners get one argument, the event object):
    beat       BeatEvent(index, count)                    a beat whose signature and proof verified
    degraded   DegradedEvent(error, lost, reauthenticating, last_beat_at, verification_failures)
                                                          a beat failed; lost = the token may have moved on;
                                                          last_beat_at = when the last beat (or the start) verified
    compromised CompromisedEvent(error, failures, last_beat_at)  ``compromised_after`` verification failures in a
                                                          row: answers are being tampered with; automatic
                                                          re-authentication stops (the program decides)
    recovered  RecoveredEvent(session)                    re-authentication opened a new heartbeat session
    killed     KilledEvent(error)                         the server ended it (debugger, revoked, banned...): final
    stopped    StoppedEvent(reason)                       the loop has ended ("stop" or "killed")
    revoked    RevokedEvent(reason, detail)               pushed on the realtime channel: key, user or app revoked; killed follows
    expired    ExpiredEvent(expires_at, detail)           the license (or end user) expired while running (docs/protocol.md 12.8):
                                                          pushed on the channel as ``revoked`` with reason ``expired``, or
                                                          a beat refused (or unreachable) after the known expiry; killed
                                                          follows with code ``expired``. The grace never covers an expiry.
    update_required UpdateRequiredEvent(message, latest_version, update_url)  pushed: this version is outdated
    notice     NoticeEvent(message, at)                   pushed: a message from the vendor's dashboard
    channel    ChannelEvent(state, code, error)           the realtime channel opened ("open") or closed ("closed")
    offline    OfflineEvent(error, grace_until)           the service cannot be reached (network, timeout, 5xx) and
                                                          the grace period (docs/protocol.md 12.6) covers now: the license
                                                          stays valid until grace_until
    grace_expired GraceExpiredEvent(grace_until, error)   still unreachable, and the grace period is over: the
                                                          program decides (lock, stop); the heartbeat goes on trying.
                                                          ``state`` leaves "offline" the moment grace_until passes.

With the default transport the beats travel on the realtime channel (GET /api/client/ws) when the
server offers it and over REST whenever it is down: one token chain on both. Pushes and channel
events are delivered on the channel's reader thread.

A beat that certainly never reached the server is sent again with the same index and token
(Client.call does that). A beat whose answer was lost cannot be: a replayed beat_index is refused
and the new token is unknown. The heartbeat then reports ``degraded`` and, with ``reauth``, runs
init, the same activation and heartbeat/start again by itself; without it, it goes on with the
next index and the old token, which works only if the server never saw the lost beat.

A beat refused as ``rejected`` (403) right after the service was unreachable (network, timeout, 5xx)
is a server that lost the session meanwhile (a restart): with ``reauth`` the heartbeat
re-authenticates once and goes on; if that fails (the key was banned meanwhile), ``killed`` carries
that call's own error.

Expiry (docs/protocol.md 12.8, docs/decisions.md): the server ends the session at expires_at. Knowing the
expiry of the last verified activation (``Client.expires_at``), the heartbeat beats at most
EXPIRY_CHECK seconds after it, so a REST client learns it on time too; a refusal then (or no answer
at all) is reported as ``expired``; a beat accepted well after it means the key was extended. The
local clock alone never ends a heartbeat the server still accepts.

``state`` is "healthy", "offline" (unreachable, within the grace period), "degraded", "compromised",
or how it ended: "revoked", "expired", "killed", "stopped". Every failed beat still emits ``degraded``.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Union

from .codes import ErrorCode, VerificationReason
from .config import ConfigError
from .crypto import beat_proof, proof_equals
from .errors import KeywardenError, verification_error
from .machine import debugger_attached
from .utc import datetime_from_ms

if TYPE_CHECKING:  # pragma: no cover
    from .channel import ChannelLink, Push
    from .client import Client, HeartbeatStart

__all__ = [
    "Heartbeat", "BeatEvent", "DegradedEvent", "CompromisedEvent", "RecoveredEvent", "KilledEvent", "StoppedEvent",
    "RevokedEvent", "ExpiredEvent", "UpdateRequiredEvent", "NoticeEvent", "ChannelEvent", "OfflineEvent", "GraceExpiredEvent", "EVENTS", "STATES",
    "Listener",
]

Listener = Callable[[Any], Any]
EVENTS = (
    "beat", "degraded", "compromised", "recovered", "killed", "stopped", "revoked", "update_required", "notice", "channel",
    "offline", "grace_expired", "expired",
)
STATES = ("healthy", "offline", "degraded", "compromised", "revoked", "expired", "killed", "stopped")
# How long after the known expiry the heartbeat beats at the latest (the server ends the session within 1 s).
EXPIRY_CHECK = 1.0
# The clock learned from the server is exact to the second: a beat refused up to this long before the known
# expiry is the expiry too; a beat accepted this long after it (plus EXPIRY_CHECK) means the key was extended.
EXPIRY_SLACK = 1.0


@dataclass(frozen=True)
class BeatEvent:
    index: int
    count: int


@dataclass(frozen=True)
class DegradedEvent:
    error: KeywardenError
    lost: bool
    reauthenticating: bool
    last_beat_at: Optional[datetime] = None
    """When the last beat verified (the verified heartbeat/start before the first beat), UTC."""
    verification_failures: int = 0
    """Verification failures in a row, this one included."""


@dataclass(frozen=True)
class CompromisedEvent:
    error: KeywardenError
    failures: int
    last_beat_at: datetime


@dataclass(frozen=True)
class RecoveredEvent:
    session: str


@dataclass(frozen=True)
class KilledEvent:
    error: KeywardenError


@dataclass(frozen=True)
class StoppedEvent:
    reason: str
    """"stop" or "killed"."""


@dataclass(frozen=True)
class RevokedEvent:
    reason: str
    detail: str


@dataclass(frozen=True)
class ExpiredEvent:
    expires_at: Optional[datetime]
    """The expiry the client knew from its last verified activation (UTC), or None."""
    detail: str


@dataclass(frozen=True)
class UpdateRequiredEvent:
    message: str
    latest_version: Optional[str]
    update_url: Optional[str]


@dataclass(frozen=True)
class NoticeEvent:
    message: str
    at: Optional[str]
    """ISO 8601 UTC."""


@dataclass(frozen=True)
class ChannelEvent:
    state: str
    """"open" or "closed"."""
    code: Optional[int] = None
    error: Optional[KeywardenError] = None


@dataclass(frozen=True)
class OfflineEvent:
    error: KeywardenError
    """Why the service was not reached."""
    grace_until: datetime
    """The license stays valid until then (UTC)."""


@dataclass(frozen=True)
class GraceExpiredEvent:
    grace_until: datetime
    """When the grace period ended (UTC)."""
    error: KeywardenError
    """The latest failure to reach the service."""


# Answers after which beating on is pointless.
FINAL = frozenset({
    ErrorCode.HEARTBEAT_KILLED, ErrorCode.BANNED, ErrorCode.EXPIRED, ErrorCode.APP_DISABLED,
    ErrorCode.INVALID_KEY, ErrorCode.HWID_MISMATCH, ErrorCode.UPDATE_REQUIRED, ErrorCode.KEY_USED,
})
# Answers given before the beat was processed: the same beat may be sent again.
NOT_PROCESSED = frozenset({ErrorCode.RATE_LIMITED, ErrorCode.LOCKED_OUT})


def _unreachable(e: KeywardenError) -> bool:
    """The service could not be reached or could not answer: a connection error, a timeout, a 5xx."""
    return e.code in (ErrorCode.NETWORK, ErrorCode.TIMEOUT) or (e.status is not None and e.status >= 500)


def _refused_beat(e: KeywardenError) -> bool:
    """A beat refused as ``rejected``: a kill, a wrong token, a replay, or a session the server lost."""
    return e.code == ErrorCode.HEARTBEAT_KILLED and e.status == 403


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _as_error(e: BaseException) -> KeywardenError:
    if isinstance(e, KeywardenError):
        return e
    return KeywardenError(ErrorCode.SERVER, f"{type(e).__name__}: {e}")


class Heartbeat:
    """Created by :meth:`Client.start_heartbeat`; beats until :meth:`stop` or a kill."""

    def __init__(
        self,
        client: "Client",
        system_id: str,
        code_hash: str,
        started: "HeartbeatStart",
        *,
        interval: Optional[float] = None,
        code_size: Optional[int] = None,
        debugger_detected: Optional[Callable[[], bool]] = None,
        reauth: Union[bool, Callable[["Client"], None], None] = None,
        link: Optional["ChannelLink"] = None,
        compromised_after: int = 5,
    ) -> None:
        if interval is not None and not interval > 0:
            raise ConfigError("heartbeat interval must be a positive number of seconds")
        if isinstance(compromised_after, bool) or not isinstance(compromised_after, int) or compromised_after < 1:
            raise ConfigError("compromised_after must be a positive integer")
        self._client = client
        self.system_id = system_id
        self.code_hash = code_hash
        self._session = started.session
        self._token = started.token
        self._interval = started.beat_interval
        self._period = interval
        self._code_size = code_size
        self._debugger = debugger_detected or debugger_attached
        self._reauth = reauth
        self._last_index: int = 0
        self._count: int = 0
        self._needs_reauth = False
        self._ended = False
        self._state = "healthy"
        self._last_verified = _now()
        self._compromised_after = compromised_after
        self._verification_failures = 0  # in a row; reset by a verified beat
        self._compromised = False  # 'compromised' emitted: no automatic re-authentication until a beat verifies
        self._after_outage = False  # the previous attempt found the service unreachable
        self._outage_reauth_spent = False  # the one re-authentication a `rejected` after an outage allows
        self._offline_told = False  # `offline` emitted and neither a verified beat nor grace_expired since
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._finished = threading.Event()
        self._listeners: Dict[str, List[Listener]] = {name: [] for name in EVENTS}
        self._thread = threading.Thread(target=self._run, name="keywarden-heartbeat", daemon=True)
        self._link = link
        # Held while a beat is sent and judged: a revocation waits for it, so a kill the beat itself
        # caused is reported with the beat's own answer.
        self._beat_lock = threading.Lock()

    # --- public ------------------------------------------------------------------------------
    @property
    def client(self) -> "Client":
        return self._client

    @property
    def beat_interval(self) -> int:
        """The server's beat_interval (s)."""
        return self._interval

    @property
    def beat_count(self) -> int:
        return self._count

    @property
    def session(self) -> str:
        return self._session

    @property
    def running(self) -> bool:
        return not self._ended

    @property
    def state(self) -> str:
        """"healthy", "offline", "degraded", "compromised", or how it ended: "revoked", "expired", "killed",
        "stopped". Offline lasts exactly as long as the grace: past grace_until it reads "degraded" at once."""
        state = self._state
        if state == "offline" and not self._client.grace_active():
            return "degraded"
        return state

    def _past_expiry(self, margin: float = 0.0) -> bool:
        """The known expiry is less than ``margin`` seconds away or has passed (server-corrected clock)."""
        ms = self._client._expiry_ms
        return ms is not None and self._client.server_now() + margin >= ms / 1000

    @property
    def last_beat_at(self) -> datetime:
        """When the last beat verified (the verified heartbeat/start before the first beat), UTC."""
        return self._last_verified

    @property
    def on_channel(self) -> bool:
        """True while the beats travel on the realtime channel."""
        return self._link is not None and self._link.ready

    def on(self, event: str, listener: Listener) -> Callable[[], None]:
        """Adds a listener; returns a function that removes it. Listeners run on the heartbeat
        thread (or the thread calling stop()); one that raises is logged and ignored."""
        if event not in self._listeners:
            raise ValueError(f"unknown heartbeat event {event!r} (one of {', '.join(EVENTS)})")
        with self._lock:
            self._listeners[event].append(listener)

        def remove() -> None:
            with self._lock:
                if listener in self._listeners[event]:
                    self._listeners[event].remove(listener)

        return remove

    def start(self) -> None:
        """Starts the beating thread (Client.start_heartbeat calls this)."""
        if not self._thread.is_alive() and not self._ended:
            if self._link is not None:
                self._link.attach(self._on_link)
            self._thread.start()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Blocks until the heartbeat has stopped (stop() or a kill); False on timeout."""
        return self._finished.wait(timeout)

    def stop(self) -> None:
        """Stops beating, waits for a beat in flight and closes the heartbeat session on the
        server. Never raises; safe to call from a listener and more than once."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
            self._state = "stopped"
        self._wake.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()
        try:
            self._send("heartbeat/stop", {"token": self._token})
        except KeywardenError as e:
            self._client.log.warning("keywarden.heartbeat.stop_failed: %s", e.message)
        if self._link is not None:
            self._link.close()
        self._emit("stopped", StoppedEvent("stop"))
        self._finished.set()

    # --- the realtime channel ----------------------------------------------------------------
    def _send(self, op: str, body: Dict[str, Any]) -> Dict[str, Any]:
        """On the channel when it is open; over REST when it is not, or went down before the call left."""
        link = self._link
        if link is not None and link.ready:
            try:
                return link.call(op, body)
            except KeywardenError as e:
                if not e.not_sent:
                    raise
        return self._client.call(op, {"session": self._session, **body})

    def _on_link(self, kind: str, payload: Any) -> None:
        if self._ended:
            return
        if kind == "state":
            self._emit("channel", ChannelEvent(payload["state"], payload.get("code"), payload.get("error")))
            return
        p: "Push" = payload
        if p.type == "revoked" and p.reason == "expired":
            threading.Thread(target=self._expired_push, args=(p,), name="keywarden-expired", daemon=True).start()
        elif p.type == "revoked":
            threading.Thread(target=self._revoked, args=(p,), name="keywarden-revoked", daemon=True).start()
        elif p.type == "update_required":
            self._emit("update_required", UpdateRequiredEvent(p.message, p.latest_version, p.update_url))
        elif p.type == "notice":
            self._emit("notice", NoticeEvent(p.message, p.at))

    def _revoked(self, p: "Push") -> None:
        with self._beat_lock:
            if self._ended:
                return
        self._state = "revoked"
        self._emit("revoked", RevokedEvent(p.reason, str(p.detail or "")))
        self._kill(
            KeywardenError(ErrorCode.HEARTBEAT_KILLED, f"heartbeat_killed: revoked ({p.reason}): {p.detail}", detail=p.detail),
            "revoked",
        )

    def _expired_push(self, p: "Push") -> None:
        with self._beat_lock:
            if self._ended:
                return
        self._expire(str(p.detail or "expired"))

    def _expire(self, detail: str, cause: Optional[KeywardenError] = None) -> None:
        """The license expired: ``expired``, then ``killed`` with code ``expired``."""
        self._kill(
            KeywardenError(
                ErrorCode.EXPIRED, f"expired: the license expired while running ({detail})",
                status=cause.status if cause is not None else None, detail=detail,
            )
        )

    # --- the loop ----------------------------------------------------------------------------
    def _next_delay(self) -> float:
        delay = self._period if self._period is not None else float(self._interval)
        until = self._client._grace.until_ms
        if self._state == "offline" and until is not None:
            # Wake when the grace period ends, so grace_expired is told on time.
            delay = min(delay, max(0.0, until / 1000 - self._client.server_now()))
        expiry = self._client._expiry_ms
        if expiry is not None:
            # The license expires before the next beat: beat just after, so the end is known on time over REST too.
            to_expiry = expiry / 1000 - self._client.server_now()
            if to_expiry >= 0:
                delay = min(delay, to_expiry + EXPIRY_CHECK)
        return delay

    def _run(self) -> None:
        while not self._ended:
            if self._wake.wait(self._next_delay()) or self._ended:
                return
            try:
                if self._needs_reauth:
                    self._recover()
                else:
                    with self._beat_lock:
                        self._beat_once()
            except BaseException as e:  # noqa: BLE001 - the loop must survive anything
                self._client.log.error("keywarden.heartbeat.unexpected: %r", e)

    def _beat_once(self) -> None:
        index = self._last_index + 1
        previous = self._token
        body: Dict[str, Any] = {
            "token": previous, "system_id": self.system_id, "beat_index": index, "code_hash": self.code_hash,
        }
        if self._code_size is not None:
            body["code_size"] = self._code_size
        try:
            body["debugger_detected"] = bool(self._debugger())
        except Exception:  # noqa: BLE001 - a broken probe must not stop the heartbeat
            body["debugger_detected"] = False
        try:
            r = self._send("heartbeat", body)
            new_token = r.get("new_token")
            count = r.get("beat_count")
            if not isinstance(new_token, str) or not isinstance(count, int) or isinstance(count, bool):
                raise verification_error(VerificationReason.MALFORMED, "beat answer lacks new_token")
            if not proof_equals(r.get("proof"), beat_proof(previous, self._session, index, new_token, count)):
                raise verification_error(VerificationReason.BAD_PROOF, "beat proof does not verify")
            self._client._grace.note(r)
            if self._past_expiry(-EXPIRY_CHECK - EXPIRY_SLACK):
                self._client._forget_expiry()  # accepted well after it: the key was extended meanwhile
        except Exception as err:  # noqa: BLE001
            if self._ended:
                return  # ended meanwhile (revoked, killed, stopped): this beat's failure is no degradation
            e = _as_error(err)
            # Past the known expiry a refused beat is the server's end of it, and no answer grants no grace.
            if (_refused_beat(e) and self._past_expiry(EXPIRY_SLACK)) or (_unreachable(e) and self._past_expiry()):
                self._expire(e.message, e)
                return
            reauth_on = self._reauth is not None and self._reauth is not False
            # A server that came back without this session answers `rejected`: worth one re-authentication.
            lost_session = _refused_beat(e) and self._after_outage and reauth_on and not self._outage_reauth_spent
            if e.code in FINAL and not lost_session:
                self._kill(e)
                return
            if lost_session:
                self._outage_reauth_spent = True
            lost = not (e.not_sent or e.code in NOT_PROCESSED)
            if lost:
                self._last_index = index  # that index may have been used: never send it again
            if self._failed(e, lost, lost and reauth_on):
                self._needs_reauth = True
                self._recover()
            return
        with self._lock:
            # While stop() waits for this beat the token still moves on: it closes with the newest.
            self._token = new_token
            self._last_index = index
            self._count = count
            self._last_verified = _now()
            self._verification_failures = 0
            self._compromised = False
            self._after_outage = False
            self._outage_reauth_spent = False
            self._offline_told = False
            if self._ended:
                return
            self._state = "healthy"
        self._emit("beat", BeatEvent(index, count))

    def _failed(self, e: KeywardenError, lost: bool, wants_reauth: bool) -> bool:
        """Books a failure and emits ``degraded`` (and ``compromised`` when the streak of
        verification failures reaches the limit). Returns whether to re-authenticate: not once
        compromised, since an attacker who spoils every answer would have it spend the program's
        rate limits for nothing.

        While the service is unreachable and the grace period covers now, the state is "offline"
        (``offline`` emitted on entering it); once the grace is over ``grace_expired`` is emitted."""
        grace = self._client._grace
        self._client._note_refusal(e.status)  # a refusal on the channel never went through Client.call
        unreachable = _unreachable(e)
        until = grace.until_ms
        covered = unreachable and grace.active(self._client.server_now())
        with self._lock:
            if e.code == ErrorCode.VERIFICATION:
                self._verification_failures += 1
            self._after_outage = unreachable
            newly = not self._compromised and self._verification_failures >= self._compromised_after
            if newly:
                self._compromised = True
            reauth = wants_reauth and not self._compromised
            if not reauth:
                self._needs_reauth = False
            if not self._ended:
                self._state = "compromised" if self._compromised else "offline" if covered else "degraded"
            going_offline = covered and not self._compromised and not self._offline_told
            grace_over = unreachable and not covered and self._offline_told and until is not None
            if going_offline:
                self._offline_told = True
            if grace_over or until is None:
                self._offline_told = False
            failures, last = self._verification_failures, self._last_verified
        self._emit("degraded", DegradedEvent(e, lost, reauth, last, failures))
        if going_offline and until is not None:
            self._client.log.warning("keywarden.heartbeat.offline: %s; valid until %s", e.message, datetime_from_ms(until).isoformat())
            self._emit("offline", OfflineEvent(e, datetime_from_ms(until)))
        if grace_over and until is not None:
            self._client.log.warning("keywarden.heartbeat.grace_expired: the grace period ended at %s", datetime_from_ms(until).isoformat())
            self._emit("grace_expired", GraceExpiredEvent(datetime_from_ms(until), e))
        if newly:
            self._client.log.warning("keywarden.heartbeat.compromised: %d verification failures in a row", failures)
            self._emit("compromised", CompromisedEvent(e, failures, last))
        return reauth

    def _recover(self) -> None:
        """init + activation + heartbeat/start again; on failure tries again at the next tick."""
        try:
            if callable(self._reauth):
                self._reauth(self._client)
            else:
                self._client.reauthenticate()
            started = self._client.open_heartbeat(self.system_id, self._link)
            with self._lock:
                if self._ended:
                    return
                self._session = started.session
                self._token = started.token
                self._interval = started.beat_interval
                self._last_index = 0
                self._count = 0
                self._needs_reauth = False
                self._after_outage = False
            self._emit("recovered", RecoveredEvent(started.session))
        except Exception as err:  # noqa: BLE001
            e = _as_error(err)
            if _unreachable(e) and self._past_expiry():
                self._expire(e.message, e)
                return
            if e.code in FINAL:
                # The call's own error (e.g. banned: the key was banned meanwhile), not a generic one.
                self._kill(e)
                return
            self._failed(e, True, True)

    def _kill(self, error: KeywardenError, state: str = "killed") -> None:
        self._client._grace.end()  # every kill is a verified refusal, a revocation or an expiry: no grace after it
        expired = error.code == ErrorCode.EXPIRED
        with self._lock:
            if self._ended:
                return
            self._ended = True
            self._state = "expired" if expired else state
        self._wake.set()
        if self._link is not None:
            self._link.close()
        if expired:
            at = self._client.expires_at
            self._client.log.warning("keywarden.heartbeat.expired: the license expired (%s)", at.isoformat() if at else "date unknown")
            self._emit("expired", ExpiredEvent(at, str(error.detail if error.detail is not None else error.message)))
        self._emit("killed", KilledEvent(error))
        self._emit("stopped", StoppedEvent("killed"))
        self._finished.set()

    def _emit(self, event: str, payload: Any) -> None:
        with self._lock:
            listeners = list(self._listeners[event])
        for cb in listeners:
            try:
                cb(payload)
            except Exception as e:  # noqa: BLE001 - a listener must not end the loop
                self._client.log.error("keywarden.heartbeat.listener_raised: %s: %r", event, e)
