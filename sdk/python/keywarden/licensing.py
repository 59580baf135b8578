"""The licensing models of docs/protocol.md 12 on the client: trials, entitlements, offline license files and
the grace period. A mixin of :class:`keywarden.Client`, kept apart so the client module stays about
the wire."""
from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, Tuple

from .codes import VerificationReason
from .config import Config, ConfigError
from .errors import KeywardenError, verification_error
from .grace import Grace, is_refusal
from .models import ClientOptions, LicenseActivation, LoggerLike, TrialInfo
from .airgap import RelayClient, RequestStore, SeatLease, check_request_nonce
from .offline import ClockRecord, OfflineLicense, default_state_file, verify_license_file
from .utc import datetime_from_ms, parse_utc_ms
from .verify import PinnedKeys

if TYPE_CHECKING:  # pragma: no cover
    from .models import Activation

__all__ = ["LicensingModels", "entitlements_of"]


def entitlements_of(answer: Mapping[str, Any]) -> Tuple[str, ...]:
    """The sorted codes of an answer (absent: none); anything but a list of strings is malformed."""
    v = answer.get("entitlements")
    if v is None:
        return ()
    if not isinstance(v, list) or not all(isinstance(e, str) for e in v):
        raise verification_error(VerificationReason.MALFORMED, "entitlements is not a list of codes")
    return tuple(sorted(set(v)))


class LicensingModels:
    """Trials, entitlements, offline files and grace (docs/protocol.md 12); mixed into Client."""

    # Provided by Client.
    config: Config
    options: ClientOptions
    log: LoggerLike
    clock: Callable[[], float]
    last_activation: Optional["Activation"]
    _keys: PinnedKeys
    _lock: threading.Lock
    call: Callable[[str, Mapping[str, Any]], Dict[str, Any]]
    machine_hwid: Callable[[], str]
    server_now: Callable[[], float]
    _require_session: Callable[[], str]
    _transport: Any

    def _init_models(self) -> None:
        self._grace = Grace()
        self._expiry_ms: Optional[int] = None
        self._entitlements: Tuple[str, ...] = ()
        self._clock_record: Optional[ClockRecord] = None

    # --- entitlements ------------------------------------------------------------------------
    @property
    def entitlements(self) -> Tuple[str, ...]:
        """The codes of the last verified license, login, register or trial answer, or of the
        last offline file accepted by :meth:`load_offline` (sorted)."""
        return self._entitlements

    def has_entitlement(self, code: str) -> bool:
        return code in self._entitlements

    def _activated(self, answer: Mapping[str, Any]) -> Tuple[str, ...]:
        """Books a verified activation answer: its entitlements, its grace and its expiry."""
        ents = entitlements_of(answer)
        self._entitlements = ents
        self._grace.note(answer)
        user = answer.get("user")
        expires = answer.get("expires_at")
        if expires is None and isinstance(user, Mapping):
            expires = user.get("expires_at")
        self._expiry_ms = parse_utc_ms(expires)
        return ents

    # --- expiry ------------------------------------------------------------------------------
    @property
    def expires_at(self) -> Optional[datetime]:
        """When the license (an end user's: the user) expires (UTC), from the last verified license,
        login, register or trial answer; None for a lifetime key or before any activation. A running
        heartbeat reports ``expired`` once the server ends its session then (docs/protocol.md 12.8)."""
        ms = self._expiry_ms
        return datetime_from_ms(ms) if ms is not None else None

    def _forget_expiry(self) -> None:
        """A beat was accepted well after the known expiry: the key was extended (date unknown)."""
        self._expiry_ms = None

    # --- grace -------------------------------------------------------------------------------
    @property
    def grace_until(self) -> Optional[datetime]:
        """Until when the license stays valid while the service cannot be reached (UTC), from the
        latest verified answer; None when it grants none or a verified refusal ended it."""
        ms = self._grace.until_ms
        return datetime_from_ms(ms) if ms is not None else None

    def grace_active(self) -> bool:
        """True while the (server-corrected) clock is before :attr:`grace_until`."""
        return self._grace.active(self.server_now())

    def _note_refusal(self, status: Optional[int]) -> None:
        if is_refusal(status) and self._grace.until_ms is not None:
            self.log.info("keywarden.grace.ended: a verified %s refusal", status)
            self._grace.end()

    # --- trial -------------------------------------------------------------------------------
    def trial(self, hwid: Optional[str] = None) -> TrialInfo:
        """Creates this device's trial key and activates it (POST /api/client/trial). Once per
        device and application: again answers ``trial_used``; ``trial_disabled`` when the
        application offers none. The key is remembered for re-authentication."""
        h = hwid if hwid is not None else self.machine_hwid()
        r = self.call("trial", {"session": self._require_session(), "hwid": h})
        key, level = r.get("key"), r.get("level")
        if not isinstance(key, str) or not key or not isinstance(level, int) or isinstance(level, bool):
            raise verification_error(VerificationReason.MALFORMED, "trial answer lacks key or level")
        ents = self._activated(r)
        self.last_activation = LicenseActivation(key, h)
        expires = parse_utc_ms(r.get("expires_at"))
        return TrialInfo(
            key=key, level=level, expires_at=datetime_from_ms(expires) if expires is not None else None,
            message=str(r.get("message") or ""), entitlements=ents,
        )

    # --- offline license files ---------------------------------------------------------------
    def offline_file(self, hwid: Optional[str] = None) -> str:
        """An offline license file for this machine (POST /api/client/offline), after a successful
        activation on this session. Save it; :meth:`load_offline` checks it without the service."""
        h = hwid if hwid is not None else self.machine_hwid()
        r = self.call("offline", {"session": self._require_session(), "hwid": h})
        f = r.get("license_file")
        if not isinstance(f, str) or not f.startswith("kwlic1."):
            raise verification_error(VerificationReason.MALFORMED, "offline answer lacks license_file")
        return f

    @property
    def state_file(self) -> str:
        """Where :meth:`load_offline` keeps the latest time seen (option ``state_file``)."""
        return str(self._record().path)

    def _record(self) -> ClockRecord:
        with self._lock:
            if self._clock_record is None:
                path = self.options.state_file or default_state_file(self.config.api_key)
                self._clock_record = ClockRecord(path, self.log)
            return self._clock_record

    def load_offline(self, file: str, hwid: Optional[str] = None) -> OfflineLicense:
        """Checks an offline license file without the service (docs/protocol.md 12.5; the order of the
        checks is in keywarden.offline). Raises ``offline_invalid`` with an OfflineReason. Every
        check records the clock in the state file. On success :attr:`entitlements` are the file's."""
        if not self.config.app_id:
            raise ConfigError("keywarden config: app_id missing (offline license files are checked against it)")
        record = self._record()
        now = self.clock()
        try:
            lic = verify_license_file(file, self._keys, self.config.app_id, hwid if hwid is not None else self.machine_hwid(), now, record.last_seen())
        except KeywardenError as e:
            self.log.warning("keywarden.offline.refused: %s", e.message)
            raise
        finally:
            record.record(now)
        self._entitlements = lic.entitlements
        return lic


    # --- air-gapped machines: activation by file, seats from a relay (docs: the README) -------
    @property
    def request_file(self) -> str:
        """Where :meth:`activation_request` keeps its nonce (option ``request_file``; default: the
        state file's path with ``.request.json``)."""
        if self.options.request_file is not None:
            return str(self.options.request_file)
        return str(Path(self.state_file).with_suffix(".request.json"))

    def _app_id(self) -> str:
        if not self.config.app_id:
            raise ConfigError("keywarden config: app_id missing (offline files and pools are checked against it)")
        return self.config.app_id

    def activation_request(
        self, key: str, hwid: Optional[str] = None, components: Optional[Mapping[str, str]] = None
    ) -> str:
        """A ``kwreq1`` activation request for ``key`` on this machine, written with no network. Carry
        it to a connected machine (dashboard or customer portal); its answer goes to
        :meth:`complete_activation`. A new request replaces the kept nonce: older answers are refused."""
        h = hwid if hwid is not None else self.machine_hwid()
        return RequestStore(self.request_file).new_request(self._app_id(), key, h, self.clock(), components)

    def complete_activation(self, response: str, hwid: Optional[str] = None) -> OfflineLicense:
        """Checks the answer to this machine's latest activation request: every check of
        :meth:`load_offline`, then its ``request_nonce`` (``offline_invalid``/``wrong_request`` for an
        answer to an older request, or when no request is kept here). Save the answer; later starts
        can check it with :meth:`load_offline`."""
        lic = self.load_offline(response, hwid)
        try:
            check_request_nonce(response, RequestStore(self.request_file).nonce())
        except KeywardenError as e:
            self._entitlements = ()
            self.log.warning("keywarden.offline.refused: %s", e.message)
            raise
        return lic

    def lease_seat(
        self, relay_url: str, hwid: Optional[str] = None, on_lost: Optional[Callable[[KeywardenError], None]] = None
    ) -> SeatLease:
        """Leases a floating seat from a relay on the local network (instead of the service) and keeps
        it renewed until ``release()`` (or ``with``, or exit). The lease is believed only with a pool
        that verifies under the pinned keys and names this application (else ``offline_invalid``);
        all seats taken: ``session_limit``. :attr:`entitlements` become the pool's."""
        relay = RelayClient(relay_url, self._keys, self._app_id(), self._transport, self.options.timeout, self.clock)
        lease = SeatLease(relay, hwid if hwid is not None else self.machine_hwid(), self.log, self.clock, on_lost)
        self._entitlements = lease.pool.entitlements
        return lease
