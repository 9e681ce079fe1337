"""What a channel serves: its repodata over HTTP, polled until the uploads are listed."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
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
    except urllib.error.URLError as exc:
        raise PipelineError(f"cannot reach {what} at {mask(url)}: {one_line(exc.reason)}") from exc
    except (TimeoutError, ConnectionError) as exc:
        raise PipelineError(f"cannot reach {what} at {mask(url)}: {one_line(exc)}") from exc
    except ValueError as exc:
        raise PipelineError(f"{what} sent something that is not JSON for {mask(url)}") from exc


def repodata_filenames(repodata: dict[str, Any]) -> dict[str, str]:
    """filename -> sha256 ('' if the server does not list one)."""
    records = {**repodata.get("packages", {}), **repodata.get("packages.conda", {})}
    return {name: str(rec.get("sha256", "")) for name, rec in records.items()}


class Channel(Protocol):
    def served(self, subdir: str) -> dict[str, str]: ...

    def repodata_url(self, subdir: str) -> str: ...


def wait_until_served(
    channel: Channel,
    expected: Mapping[str, tuple[str, str]],
    timeout_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, str]:
    """Poll the repodata until every file is listed (bounded); filename -> problem.

    `expected` maps filename -> (subdir, sha256).
    """
    deadline = clock() + timeout_s
    delay = 0.5
    pending = dict(expected)
    problems: dict[str, str] = {}
    while True:
        for subdir in sorted({s for s, _ in pending.values()}):
            listed = channel.served(subdir)
            for filename, (where, sha256) in list(pending.items()):
                if where == subdir and filename in listed:
                    if listed[filename] and sha256 and listed[filename] != sha256:
                        problems[filename] = "served with a different sha256"
                    del pending[filename]
        if not pending or clock() >= deadline:
            break
        log(f"waiting for {len(pending)} package(s) to be listed in the channel's repodata")
        sleep(min(delay, max(0.0, deadline - clock())))
        delay = min(delay * 2, 5.0)
    for filename, (subdir, _) in pending.items():
        problems[filename] = f"not listed in {channel.repodata_url(subdir)} after {timeout_s:.0f}s"
    return problems
