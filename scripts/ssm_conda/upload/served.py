"""What a channel serves: its repodata, read by py-rattler (and the HTTP reads of the credential checks)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from ssm_conda.channels import fetch_repodata
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


def listed_in(channel_url: str, subdir: str, headers: dict[str, str]) -> dict[str, str]:
    """filename -> sha256 of what the channel lists for `subdir` ({} while it has none), through py-rattler."""
    try:
        repodata = fetch_repodata(channel_url, subdir, headers)
    except PipelineError as exc:
        raise PipelineError(one_line(exc)) from exc
    records = repodata.load_all_records() if repodata is not None else []
    return {r.file_name: r.sha256.hex() if r.sha256 else "" for r in records}
