"""A running heartbeat (PROTOCOL 6, SPEC heartbeat rules) on a daemon thread.

Events (listeners get one argument, the event object):
    beat       BeatEvent(index, count)                    a beat whose signature and proof verified
    degraded   DegradedEvent(error, lost, reauthenticating) a beat failed; lost = the token may have moved on
    recovered  RecoveredEvent(session)                    re-authentication opened a new heartbeat session
    killed     KilledEvent(error)                         the server ended it (debugger, revoked, banned...): final
    stopped    StoppedEvent(reason)                       the loop has ended ("stop" or "killed")
    revoked    RevokedEvent(reason, detail)               pushed on the realtime channel: key, user or app revoked; killed follows
    update_required UpdateRequiredEvent(message, latest_version, update_url)  pushed: this version is outdated
    notice     NoticeEvent(message, at)                   pushed: a message from the vendor's dashboard
    channel    ChannelEvent(state, code, error)           the realtime channel opened ("open") or closed ("closed")

With the default transport the beats travel on the realtime channel (GET /api/client/ws) when the
server offers it and over REST whenever it is down: one token chain on both. Pushes and channel
events are delivered on the channel's reader thread.

A beat that certainly never reached the server is sent again with the same index and token
(Client.call does that). A beat whose answer was lost cannot be: a replayed beat_index is refused
and the new token is unknown. The heartbeat then reports ``degraded`` and, with ``reauth``, runs
init, the same activation and heartbeat/start again by itself; without it, it goes on with the
next index and the old token, which works only if the server never saw the lost beat.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Union

from .codes import ErrorCode, VerificationReason
from .config import ConfigError
from .crypto import beat_proof, proof_equals
from .errors import KeywardenError, verification_error
from .machine import debugger_attached

if TYPE_CHECKING:  # pragma: no cover
    from .channel import ChannelLink, Push
    from .client import Client, HeartbeatStart

__all__ = [
    "Heartbeat", "BeatEvent", "DegradedEvent", "RecoveredEvent", "KilledEvent", "StoppedEvent",
    "RevokedEvent", "UpdateRequiredEvent", "NoticeEvent", "ChannelEvent", "EVENTS", "Listener",
]

Listener = Callable[[Any], Any]
EVENTS = ("beat", "degraded", "recovered", "killed", "stopped", "revoked", "update_required", "notice", "channel")


@dataclass(frozen=True)
class BeatEvent:
    index: int
    count: int


@dataclass(frozen=True)
class DegradedEvent:
    error: KeywardenError
    lost: bool
    reauthenticating: bool


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


# Answers after which beating on is pointless.
FINAL = frozenset({
    ErrorCode.HEARTBEAT_KILLED, ErrorCode.BANNED, ErrorCode.EXPIRED, ErrorCode.APP_DISABLED,
    ErrorCode.INVALID_KEY, ErrorCode.HWID_MISMATCH, ErrorCode.UPDATE_REQUIRED, ErrorCode.KEY_USED,
})
# Answers given before the beat was processed: the same beat may be sent again.
NOT_PROCESSED = frozenset({ErrorCode.RATE_LIMITED, ErrorCode.LOCKED_OUT})


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
    ) -> None:
        if interval is not None and not interval > 0:
            raise ConfigError("heartbeat interval must be a positive number of seconds")
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
        if p.type == "revoked":
            threading.Thread(target=self._revoked, args=(p,), name="keywarden-revoked", daemon=True).start()
        elif p.type == "update_required":
            self._emit("update_required", UpdateRequiredEvent(p.message, p.latest_version, p.update_url))
        elif p.type == "notice":
            self._emit("notice", NoticeEvent(p.message, p.at))

    def _revoked(self, p: "Push") -> None:
        with self._beat_lock:
            if self._ended:
                return
        self._emit("revoked", RevokedEvent(p.reason, str(p.detail or "")))
        self._kill(KeywardenError(ErrorCode.HEARTBEAT_KILLED, f"heartbeat_killed: revoked ({p.reason}): {p.detail}", detail=p.detail))

    # --- the loop ----------------------------------------------------------------------------
    def _next_delay(self) -> float:
        return self._period if self._period is not None else float(self._interval)

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
        except Exception as err:  # noqa: BLE001
            e = _as_error(err)
            if e.code in FINAL:
                self._kill(e)
                return
            lost = not (e.not_sent or e.code in NOT_PROCESSED)
            if lost:
                self._last_index = index  # that index may have been used: never send it again
            reauth = lost and self._reauth is not None and self._reauth is not False
            self._emit("degraded", DegradedEvent(e, lost, reauth))
            if reauth:
                self._needs_reauth = True
                self._recover()
            return
        with self._lock:
            # While stop() waits for this beat the token still moves on: it closes with the newest.
            self._token = new_token
            self._last_index = index
            self._count = count
            if self._ended:
                return
        self._emit("beat", BeatEvent(index, count))

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
            self._emit("recovered", RecoveredEvent(started.session))
        except Exception as err:  # noqa: BLE001
            e = _as_error(err)
            if e.code in FINAL:
                self._kill(e)
                return
            self._emit("degraded", DegradedEvent(e, True, True))

    def _kill(self, error: KeywardenError) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
        self._wake.set()
        if self._link is not None:
            self._link.close()
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
