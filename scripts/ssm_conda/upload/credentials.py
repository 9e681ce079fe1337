"""Credentials: from the environment, or found where rattler-build finds them, never from options.

rattler's auth storage ($RATTLER_AUTH_FILE if set, the keyring, ~/.rattler/credentials.json, ~/.netrc) is
written by `rattler-build auth login` and `pixi auth login`. With no key in the environment the upload
functions get api_key=None and look the credential up there themselves. We read $RATTLER_AUTH_FILE only
to name the entry in messages and to authenticate our own repodata reads; a keyring entry stays invisible
to us, so those reads go out anonymously. Every value we see is registered here and masked in all output.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ssm_conda.console import PipelineError

_SECRETS: set[str] = set()


def register_secret(value: str | None) -> str | None:
    if value and len(value) >= 4:
        _SECRETS.add(value)
    return value


def mask(text: str) -> str:
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, "****")
    return text


def one_line(text: object, limit: int = 300) -> str:
    """A message as one masked line (rattler errors span several lines)."""
    flat = " ".join(mask(str(text)).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


@dataclass(frozen=True)
class Credential:
    """A credential that was found; `source` says where (never the value)."""

    source: str
    token: str | None = None  # known to us: sent with our own reads
    passed: bool = False  # handed to rattler-build; otherwise it looks the credential up itself
    auth_file: Path | None = None  # the file it came from, handed to rattler-build
    username: str | None = None  # BasicHTTP entries
    access_key_id: str | None = None  # S3
    secret_access_key: str | None = None
    session_token: str | None = None

    def describe(self) -> str:
        return f"{self.source} (****)" if self.token or self.secret_access_key else self.source


def lookup_keys(url: str) -> list[str]:
    """The auth-storage keys rattler tries for `url`, in its order (rattler_networking get_by_url).

    The host without port; for s3:// the URL and each parent instead of wildcards; otherwise
    `*.domain` for the host and each parent domain (none for an IP address).
    """
    parsed = urlparse(url)
    host = parsed.hostname or ""
    if not host:
        return []
    if parsed.scheme == "s3":
        path = url.rstrip("/")
        return [host, *(path.rsplit("/", i)[0] for i in range(path.count("/") - 1))]
    try:
        ipaddress.ip_address(host)
        return [host]
    except ValueError:
        labels = host.split(".")
        return [host, *(f"*.{'.'.join(labels[i:])}" for i in range(len(labels)))]


def read_auth_file(env: dict[str, str]) -> tuple[Path | None, dict[str, Any]]:
    """$RATTLER_AUTH_FILE, if set: its path, and the JSON object mapping storage keys to credentials."""
    if not env.get("RATTLER_AUTH_FILE"):
        return None, {}
    path = Path(env["RATTLER_AUTH_FILE"])
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise PipelineError(f"RATTLER_AUTH_FILE points to {path}, which does not exist") from exc
    except (OSError, ValueError) as exc:
        raise PipelineError(f"RATTLER_AUTH_FILE {path} is not a readable JSON file: {one_line(exc)}") from exc
    if not isinstance(data, dict):
        raise PipelineError(f"RATTLER_AUTH_FILE {path} must hold a JSON object keyed by host")
    return path, data


def stored_entry(entries: dict[str, Any], url: str) -> tuple[str, Any] | None:
    """The entry rattler would use for `url` and the key it is stored under."""
    return next(((key, entries[key]) for key in lookup_keys(url) if key in entries), None)


def credential_from_entry(key: str, entry: Any, kinds: Sequence[str], auth_file: Path | None = None) -> Credential | None:
    """A credential of one of `kinds` from an auth-file entry, or None."""
    source = f"$RATTLER_AUTH_FILE[{key}]"
    for kind in kinds:
        value = entry.get(kind) if isinstance(entry, dict) else None
        if isinstance(value, str) and kind.endswith("Token"):  # BearerToken, CondaToken
            return Credential(source, register_secret(value), auth_file=auth_file)
        if kind == "BasicHTTP" and isinstance(value, dict) and value.get("password"):
            return Credential(source, register_secret(value["password"]), username=value.get("username"),
                              auth_file=auth_file)
        if kind == "S3Credentials" and isinstance(value, dict) and value.get("access_key_id") and value.get("secret_access_key"):
            return Credential(source, auth_file=auth_file, access_key_id=register_secret(value["access_key_id"]),
                              secret_access_key=register_secret(value["secret_access_key"]),
                              session_token=register_secret(value.get("session_token")))
    return None
