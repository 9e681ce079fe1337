"""What a channel serves: its repodata over HTTP, polled until the uploads are listed."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ssm_conda.console import PipelineError
from ssm_conda.upload.credentials import mask, one_line

HTTP_TIMEOUT_S = 30


class NotFound(Exception):
    pass


def http_get_json(url: str, headers: dict[str, str] | None = None, what: str = "server") -> Any:
    """GET a JSON document; 404 -> NotFound, auth and connection failures -> one-line PipelineError."""
    request = urllib.request.Request(url, headers={"User-Agent": "ssm-conda-upload", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise NotFound(url) from exc
        if exc.code in (401, 403):
            raise PipelineError(f"{what} rejected the credentials (HTTP {exc.code}) for {mask(url)}") from exc
        raise PipelineError(f"{what} answered HTTP {exc.code} for {mask(url)}") from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        reason = getattr(exc, "reason", exc)
        raise PipelineError(f"cannot reach {what} at {mask(url)}: {one_line(reason)}") from exc
    except ValueError as exc:
        raise PipelineError(f"{what} sent something that is not JSON for {mask(url)}") from exc


def repodata_filenames(repodata: dict[str, Any]) -> dict[str, str]:
    """filename -> sha256 ('' if the repodata does not list one)."""
    records = {**repodata.get("packages", {}), **repodata.get("packages.conda", {})}
    return {name: str(rec.get("sha256", "")) for name, rec in records.items()}


class Channel(Protocol):
    """What waiting needs of an upload target (targets.Target): the repodata it serves."""

    def served(self, subdir: str) -> dict[str, str]: ...

    def repodata_url(self, subdir: str) -> str: ...


class Uploaded(Protocol):
    """What waiting needs of an uploaded package (archives.LocalPackage)."""

    subdir: str
    sha256: str

    @property
    def filename(self) -> str: ...


def wait_until_served(target: Channel, packages: Sequence[Uploaded], timeout_s: float,
                      log: Callable[[str], None]) -> dict[str, str]:
    """Poll the repodata until it lists every package, within `timeout_s`; returns filename -> problem."""
    deadline = time.monotonic() + timeout_s
    delay = 0.5
    pending = list(packages)
    problems: dict[str, str] = {}
    while True:
        for subdir in sorted({p.subdir for p in pending}):
            listed = target.served(subdir)
            for pkg in [p for p in pending if p.subdir == subdir and p.filename in listed]:
                if listed[pkg.filename] not in ("", pkg.sha256):
                    problems[pkg.filename] = "served with a different sha256"
                pending.remove(pkg)
        if not pending or time.monotonic() >= deadline:
            break
        log(f"waiting for {len(pending)} package(s) to be listed in the channel's repodata")
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 5.0)
    for pkg in pending:
        problems[pkg.filename] = f"not listed in {target.repodata_url(pkg.subdir)} after {timeout_s:.0f}s"
    return problems
