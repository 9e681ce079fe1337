"""Credentials: a key from the environment, or rattler's auth storage ($RATTLER_AUTH_FILE, the keyring,
~/.rattler/credentials.json, ~/.netrc: what `rattler-build auth login` and `pixi auth login` write), which
rattler reads itself and we never parse; never from options. Every value we see is masked in all output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SECRETS: set[str] = set()
AUTH_STORAGE = "rattler's auth storage ($RATTLER_AUTH_FILE, keyring, ~/.rattler/credentials.json or ~/.netrc)"


def register_secret(value: str | None) -> str | None:
    if value and len(value) >= 4:
        _SECRETS.add(value)
    return value


def mask(text: str) -> str:
    """Every registered secret, and the user and password of any URL, as ****."""
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, "****")
    return re.sub(r"(?<=://)[^/@\s]+@", "****@", text)


def one_line(text: object, limit: int = 300) -> str:
    """A message as one masked line (rattler errors span several lines)."""
    flat = " ".join(mask(str(text)).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


@dataclass(frozen=True)
class Credential:
    """A credential that was found; `source` says where (never the value)."""

    source: str
    token: str | None = None  # from the environment: handed to rattler-build and sent with our reads

    def describe(self) -> str:
        return f"{self.source} (****)" if self.token else self.source
