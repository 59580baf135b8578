"""Keywarden client SDK for Python: signed requests, verified responses, typed errors, robust
heartbeats. Runtime dependency: ``cryptography``. Start with ``Client.from_config("keywarden.json")``
(or ``AsyncClient`` under asyncio).
"""
from __future__ import annotations

import logging

from .aio import AsyncClient, AsyncHeartbeat
from .client import (
    AppInfo,
    Client,
    ClientOptions,
    HeartbeatStart,
    LicenseActivation,
    LicenseInfo,
    LoggerLike,
    LoginActivation,
    TrialInfo,
    UserInfo,
)
from .codes import ErrorCode, OfflineReason, VerificationReason
from .config import Config, ConfigError, ResponseKey, load_config, parse_config
from .error_table import ERROR_ENTRIES, FALLBACK_CODE, STATUS_FALLBACKS
from .errors import KeywardenError, code_for, error_from_answer
from .heartbeat import (
    BeatEvent, ChannelEvent, CompromisedEvent, DegradedEvent, Heartbeat, KilledEvent, NoticeEvent, RecoveredEvent,
    RevokedEvent, StoppedEvent, UpdateRequiredEvent, OfflineEvent, GraceExpiredEvent, ExpiredEvent,
)
from .airgap import SeatLease, SeatPool, build_request, verify_pool
from .offline import OfflineLicense, default_state_file, verify_license_file
from .machine import debugger_attached, hwid_for, machine_hwid, raw_machine_id, self_hash
from .updates import Artifact, UpdateError, UpdateOffer, UpdateReason
from .transport import DefaultTransport, Transport, TransportError, TransportRequest, TransportResponse

__version__ = "0.1.0"

# A library never configures logging; the host program decides where "keywarden" records go.
logging.getLogger("keywarden").addHandler(logging.NullHandler())

__all__ = [
    "__version__",
    "Client", "AsyncClient", "ClientOptions", "LoggerLike",
    "AppInfo", "UserInfo", "LicenseInfo", "TrialInfo", "HeartbeatStart", "LoginActivation", "LicenseActivation",
    "OfflineLicense", "OfflineReason", "SeatLease", "SeatPool", "build_request", "verify_pool", "verify_license_file", "default_state_file", "OfflineEvent", "GraceExpiredEvent", "ExpiredEvent",
    "Heartbeat", "AsyncHeartbeat", "BeatEvent", "DegradedEvent", "CompromisedEvent", "RecoveredEvent", "KilledEvent", "StoppedEvent",
    "RevokedEvent", "UpdateRequiredEvent", "NoticeEvent", "ChannelEvent",
    "Artifact", "UpdateOffer", "UpdateError", "UpdateReason",
    "KeywardenError", "ErrorCode", "VerificationReason", "code_for", "error_from_answer",
    "ERROR_ENTRIES", "STATUS_FALLBACKS", "FALLBACK_CODE",
    "Config", "ConfigError", "ResponseKey", "load_config", "parse_config",
    "Transport", "TransportRequest", "TransportResponse", "TransportError", "DefaultTransport",
    "machine_hwid", "hwid_for", "raw_machine_id", "self_hash", "debugger_attached",
]
