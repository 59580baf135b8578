"""The client's option and result types (plain frozen dataclasses)."""
from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, Union, cast

from .config import ConfigError
from .transport import Transport

try:  # Python 3.8+
    from typing import Protocol
except ImportError:  # pragma: no cover
    Protocol = object  # type: ignore[assignment,misc]

__all__ = [
    "LoggerLike", "ClientOptions", "OptionsArg", "parse_options",
    "AppInfo", "UserInfo", "LicenseInfo", "TrialInfo", "HeartbeatStart", "LoginActivation", "LicenseActivation", "Activation",
]


class LoggerLike(Protocol):
    """What the ``logger`` option needs: ``logging.Logger`` fits, so do most structured loggers."""

    def debug(self, msg: str, *args: Any) -> Any: ...
    def info(self, msg: str, *args: Any) -> Any: ...
    def warning(self, msg: str, *args: Any) -> Any: ...
    def error(self, msg: str, *args: Any) -> Any: ...


@dataclass(frozen=True)
class ClientOptions:
    """Client options (all optional).

    base_url: overrides the config's ``base_url``.
    timeout: seconds per call (the whole exchange). Default 10.
    retries: extra attempts for a call that certainly never reached the server. Default 2.
    proxy: ``http://[user:pass@]host:port`` for the default transport.
    logger: default ``logging.getLogger("keywarden")``.
    clock: seconds since the epoch (``time.time`` by default); the server's offset is learned on top.
    transport: your own ``(TransportRequest) -> TransportResponse`` callable.
    enc_key: asks for encrypted success bodies (docs/protocol.md 5); needs the config's api_secret.
    max_clock_offset: largest clock offset (s) adopted from the first verified answer. Default 600.
    max_response_bytes: limit of the default transport. Default 1 MiB.
    state_file: where offline license checks keep the latest time seen (docs/protocol.md 12.5). Default
        per user and application, see ``keywarden.offline.default_state_file``.
    request_file: where :meth:`Client.activation_request` keeps the nonce of this machine's latest
        activation request. Default: the state file's name with ``.request.json`` instead of ``.json``.
    """

    base_url: Optional[str] = None
    timeout: float = 10.0
    retries: int = 2
    proxy: Optional[str] = None
    logger: Optional[LoggerLike] = None
    clock: Optional[Callable[[], float]] = None
    transport: Optional[Transport] = None
    enc_key: Optional[str] = None
    max_clock_offset: float = 600.0
    max_response_bytes: int = 1 << 20
    state_file: Optional[Union[str, "os.PathLike[str]"]] = None
    request_file: Optional[Union[str, "os.PathLike[str]"]] = None


OptionsArg = Union[ClientOptions, Mapping[str, Any], None]


def parse_options(options: object, overrides: Mapping[str, Any]) -> ClientOptions:
    known = {f.name for f in fields(ClientOptions)}
    given: Dict[str, Any] = {}
    if isinstance(options, ClientOptions):
        base = options
    elif options is None:
        base = ClientOptions()
    elif isinstance(options, Mapping):
        base = ClientOptions()
        given.update(cast(Mapping[str, Any], options))
    else:
        raise ConfigError("options must be a ClientOptions, a dict or None")
    given.update(overrides)
    unknown = sorted(set(given) - known)
    if unknown:
        raise ConfigError(f"unknown client option(s): {', '.join(unknown)}")
    return replace(base, **given)


@dataclass(frozen=True)
class AppInfo:
    name: str
    version: str
    hwid_lock: bool
    session: str


@dataclass(frozen=True)
class UserInfo:
    username: str
    level: int
    expires_at: Optional[datetime]
    """Timezone-aware UTC, or None for an account without expiry."""
    message: str
    entitlements: Tuple[str, ...] = ()
    """The key's entitlement codes, sorted (docs/protocol.md 12.3)."""

    def has_entitlement(self, code: str) -> bool:
        return code in self.entitlements


@dataclass(frozen=True)
class LicenseInfo:
    level: int
    expires_at: Optional[datetime]
    """Timezone-aware UTC, or None for a lifetime key."""
    message: str
    entitlements: Tuple[str, ...] = ()
    """The key's entitlement codes, sorted (docs/protocol.md 12.3)."""

    def has_entitlement(self, code: str) -> bool:
        return code in self.entitlements


@dataclass(frozen=True)
class TrialInfo:
    """A trial key created for this device and activated at once (docs/protocol.md 12.4)."""

    key: str
    """The plaintext key: the server shows it this once."""
    level: int
    expires_at: Optional[datetime]
    message: str
    entitlements: Tuple[str, ...] = ()

    def has_entitlement(self, code: str) -> bool:
        return code in self.entitlements


@dataclass(frozen=True)
class HeartbeatStart:
    session: str
    token: str
    beat_interval: int


@dataclass(frozen=True)
class LoginActivation:
    username: str
    password: str = ""
    hwid: str = ""

    def __repr__(self) -> str:  # never print the password
        return f"LoginActivation(username={self.username!r}, hwid={self.hwid!r})"


@dataclass(frozen=True)
class LicenseActivation:
    key: str
    hwid: str


Activation = Union[LoginActivation, LicenseActivation]
