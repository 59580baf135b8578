"""keywarden.json, format 1 (sdk/vectors/README.md): what the dashboard's SDK zip carries.

A bad configuration is a programming mistake, not a runtime outcome, so it raises
:class:`ConfigError` (a ``ValueError``) from ``Client.from_config``, and from
``Client.load_offline`` when the config lacks the ``app_id`` an offline license file is checked against.
"""
from __future__ import annotations

import base64
import binascii
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union, cast

__all__ = ["ConfigError", "ResponseKey", "Config", "parse_config", "load_config"]


class ConfigError(ValueError):
    """keywarden.json (or the dict given instead) is unusable."""


@dataclass(frozen=True)
class ResponseKey:
    """A pinned Ed25519 response-signing key (docs/protocol.md 4)."""

    kid: str
    public_key: str
    """base64 of the 32-byte public key."""
    alg: str = "Ed25519"


@dataclass(frozen=True)
class Config:
    format: int
    base_url: str
    api_key: str
    response_keys: Tuple[ResponseKey, ...]
    app_name: Optional[str] = None
    version: Optional[str] = None
    app_id: Optional[str] = None
    """The application's id: an offline license file must name it (docs/protocol.md 12.5)."""
    # Present only when the application requires signed requests. repr=False: it must not end
    # up in a log line through a debug print of the config.
    api_secret: Optional[str] = field(default=None, repr=False)


def _fail(msg: str) -> "ConfigError":
    return ConfigError(f"keywarden config: {msg}")


def _decode_key(value: Any) -> Optional[bytes]:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def parse_config(raw: Union[Mapping[str, Any], Config, object]) -> Config:
    """Checks a parsed keywarden.json; unknown fields are ignored (later formats add fields)."""
    if isinstance(raw, Config):
        return raw
    if not isinstance(raw, Mapping):
        raise _fail("not a JSON object")
    raw = cast(Mapping[str, Any], raw)
    fmt = raw.get("format")
    if type(fmt) is not int or fmt != 1:
        raise _fail(f"unsupported format {json.dumps(fmt)} (this SDK reads format 1)")
    base_url = raw.get("base_url")
    if not isinstance(base_url, str) or not re.match(r"^https?://[^/\s]", base_url):
        raise _fail("base_url must be an http(s) URL")
    api_key = raw.get("api_key")
    if not isinstance(api_key, str) or api_key == "":
        raise _fail("api_key missing")
    version = raw.get("version")
    if version is not None and not isinstance(version, str):
        raise _fail("version must be a string")
    secret = raw.get("api_secret")
    if secret is not None and not isinstance(secret, str):
        raise _fail("api_secret must be a string")
    app_name = raw.get("app_name")
    app_id = raw.get("app_id")
    if app_id is not None and (not isinstance(app_id, str) or app_id == ""):
        raise _fail("app_id must be a non-empty string")
    keys_raw = raw.get("response_keys")
    if not isinstance(keys_raw, list) or not keys_raw:
        raise _fail("response_keys must list at least one key")
    keys: List[ResponseKey] = []
    for item in cast(List[object], keys_raw):
        if not isinstance(item, Mapping):
            raise _fail("a response key is not an object")
        k = cast(Dict[str, Any], item)
        kid = k.get("kid")
        if not isinstance(kid, str) or kid == "":
            raise _fail("a response key has no kid")
        alg = k.get("alg")
        if alg is not None and alg != "Ed25519":
            raise _fail(f"key {kid}: unsupported alg {alg!r}")
        decoded = _decode_key(k.get("public_key"))
        if decoded is None or len(decoded) != 32:
            raise _fail(f"key {kid}: public_key must be base64 of 32 bytes")
        keys.append(ResponseKey(kid=kid, public_key=k["public_key"]))
    return Config(
        format=1,
        base_url=base_url,
        api_key=api_key,
        response_keys=tuple(keys),
        app_name=app_name if isinstance(app_name, str) else None,
        version=version,
        app_id=app_id,
        api_secret=secret if secret else None,
    )


def load_config(path: Union[str, "os.PathLike[str]"]) -> Config:
    """Reads and checks a keywarden.json file."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise _fail(f"cannot read {os.fspath(path)}: {e}") from e
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise _fail(f"{os.fspath(path)} is not JSON: {e}") from e
    return parse_config(raw)
