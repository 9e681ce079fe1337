"""Credentials: a key from the environment, or rattler's auth storage ($RATTLER_AUTH_FILE, the keyring,
~/.rattler/credentials.json, ~/.netrc: what `rattler-build auth login` and `pixi auth login` write), which
rattler reads itself and we never parse; never from options. Every value we see is masked in all output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rattler.networking import AuthenticationMiddleware, Client

from ssm_conda.console import UsageError

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


def check_auth_storage() -> None:
    """A malformed auth file is not "no credentials": rattler-build reads it as none, py-rattler's client
    refuses it naming the file. Its parser's detail may quote a token: only the file and where is shown."""
    try:
        Client([AuthenticationMiddleware()])
    except Exception as exc:  # py-rattler's AuthenticationStorageError
        where = re.sub(r"^(failed to parse .+?): .*?((?: at line \d+ column \d+)?)$", r"\1\2", one_line(exc))
        raise UsageError(f"{where}: not what rattler's auth storage holds (JSON: each host mapped to its BearerToken, "
                         "CondaToken or BasicHTTP entry); fix it, or log in again with `rattler-build auth login`") from exc


@dataclass(frozen=True)
class Credential:
    """A credential that was found; `source` says where (never the value)."""

    source: str
    token: str | None = None  # from the environment: handed to rattler-build and sent with our reads

    def describe(self) -> str:
        return f"{self.source} (****)" if self.token else self.source
