"""Upload the packages of a local channel (default output/) to a conda server.

    python scripts/upload.py TARGET [target options] [--cuda X.Y] [--python X.Y] [--torch X.Y]
                             [--output-dir DIR] [--dry-run] [--skip-existing]

Targets: prefix (prefix.dev), anaconda (anaconda.org), quetz, artifactory, s3. Every package is
checked before anything is sent (a file that is not a valid conda archive stops the run), then
uploaded through rattler-build's upload support (S3: boto3, then the channel is indexed with
rattler), and finally looked up in the channel's repodata until it is served.

Credentials come only from environment variables or from $RATTLER_AUTH_FILE, never from flags:
  prefix       PREFIX_API_KEY, a BearerToken for the host, or trusted publishing in GitHub Actions
  anaconda     ANACONDA_API_KEY, or a CondaToken for anaconda.org
  quetz        QUETZ_API_KEY, or a CondaToken for the server's host
  artifactory  ARTIFACTORY_TOKEN, or a BearerToken / BasicHTTP password for the server's host
  s3           AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), or S3Credentials
               for s3://BUCKET
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

from ssm_conda.console import PipelineError, UsageError, format_table, human_size
from ssm_conda.matrix import Selection, select
from ssm_conda.paths import REPO_ROOT
from ssm_conda.sources import sha256_of

TARGETS = ("prefix", "anaconda", "quetz", "artifactory", "s3")
DEFAULT_OUTPUT = REPO_ROOT / "output"
SUBDIR_RE = re.compile(r"noarch|[a-z0-9]+-[a-z0-9_]+")
# cuda130_py312_torch213_h<hash>_0 (recipe/recipe.yaml, build.string)
BUILD_STRING_RE = re.compile(r"cuda(?P<cuda>\d+)_py(?P<python>\d+)_torch(?P<torch>\d+)_h[0-9a-f]+_\d+")
ARCHIVE_SUFFIXES = (".conda", ".tar.bz2")
HTTP_TIMEOUT_S = 30


# --------------------------------------------------------------------------------------------
# Secrets: every credential we resolve is registered here and masked in anything we print.
# --------------------------------------------------------------------------------------------

_SECRETS: set[str] = set()


def register_secret(value: str | None) -> str | None:
    if value and len(value) >= 4:
        _SECRETS.add(value)
    return value


def mask(text: str) -> str:
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, "****")
    return text


def one_line(text: str, limit: int = 300) -> str:
    """An exception message as one masked line (rattler errors span several lines)."""
    flat = " ".join(mask(str(text)).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


# --------------------------------------------------------------------------------------------
# Credentials
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Credential:
    """A resolved credential; `source` says where it came from (never the value)."""

    kind: str  # "token", "trusted-publishing", "s3"
    source: str
    token: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None

    def describe(self) -> str:
        if self.kind == "trusted-publishing":
            return "trusted publishing (GitHub Actions OIDC)"
        return f"{self.source} (****)"


def load_auth_file(env: dict[str, str]) -> tuple[Path | None, dict[str, Any]]:
    path = env.get("RATTLER_AUTH_FILE")
    if not path:
        return None, {}
    auth_path = Path(path)
    try:
        data = json.loads(auth_path.read_text())
    except FileNotFoundError as exc:
        raise PipelineError(f"RATTLER_AUTH_FILE points to {auth_path}, which does not exist") from exc
    except (OSError, ValueError) as exc:
        raise PipelineError(f"RATTLER_AUTH_FILE {auth_path} is not a readable JSON file: {exc}") from exc
    if not isinstance(data, dict):
        raise PipelineError(f"RATTLER_AUTH_FILE {auth_path} must hold a JSON object keyed by host")
    return auth_path, data


def auth_entry(data: dict[str, Any], keys: Iterable[str]) -> Any:
    """The auth-file entry for the first matching key; `*.example.com` matches subdomains."""
    for key in keys:
        if key in data:
            return data[key]
    for key in keys:
        host = key.split("://")[-1].split(":")[0]
        for pattern, value in data.items():
            if pattern.startswith("*.") and (host.endswith(pattern[1:]) or host == pattern[2:]):
                return value
    return None


def _token_from_entry(entry: Any, accepted: Sequence[str]) -> str | None:
    if not isinstance(entry, dict):
        return None
    for kind in accepted:
        value = entry.get(kind)
        if kind == "BasicHTTP" and isinstance(value, dict):
            return value.get("password")
        if isinstance(value, str):
            return value
    return None


def host_keys(url: str) -> list[str]:
    parsed = urlparse(url)
    keys = []
    if parsed.port:
        keys.append(f"{parsed.hostname}:{parsed.port}")
    if parsed.hostname:
        keys.append(parsed.hostname)
    return keys


# --------------------------------------------------------------------------------------------
# Local packages
# --------------------------------------------------------------------------------------------


@dataclass
class LocalPackage:
    path: Path
    subdir: str
    name: str = ""
    version: str = ""
    build: str = ""
    size: int = 0
    sha256: str = ""
    problem: str | None = None

    @property
    def filename(self) -> str:
        return self.path.name


def find_packages(output_dir: Path) -> list[LocalPackage]:
    if not output_dir.is_dir():
        raise UsageError(f"output channel {output_dir} does not exist (build first, or pass --output-dir)")
    found = []
    for subdir in sorted(p for p in output_dir.iterdir() if p.is_dir() and SUBDIR_RE.fullmatch(p.name)):
        for path in sorted(subdir.iterdir()):
            if path.is_file() and path.name.endswith(ARCHIVE_SUFFIXES):
                found.append(LocalPackage(path=path, subdir=subdir.name, size=path.stat().st_size))
    return found


def version_digits(value: str) -> str:
    return value.replace(".", "")


def filter_packages(packages: list[LocalPackage], selection: Selection) -> list[LocalPackage]:
    """Keep the packages whose build string matches the selectors (validated against variants/)."""
    if selection.cuda is None and selection.python is None and selection.torch is None:
        return packages
    select(selection)  # raises UsageError for values variants/ does not accept
    wanted = {
        "cuda": selection.cuda and version_digits(selection.cuda),
        "python": selection.python and version_digits(selection.python),
        "torch": selection.torch and version_digits(selection.torch),
    }
    kept = []
    for pkg in packages:
        build = pkg.build or _build_from_filename(pkg.filename)
        match = BUILD_STRING_RE.fullmatch(build or "")
        if match and all(v is None or match.group(k) == v for k, v in wanted.items()):
            kept.append(pkg)
    return kept


def _build_from_filename(filename: str) -> str | None:
    stem = filename.removesuffix(".conda").removesuffix(".tar.bz2")
    parts = stem.rsplit("-", 2)
    return parts[2] if len(parts) == 3 else None


def local_repodata(output_dir: Path, subdir: str) -> dict[str, Any]:
    path = output_dir / subdir / "repodata.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {**data.get("packages", {}), **data.get("packages.conda", {})}


def check_package(pkg: LocalPackage, indexed: dict[str, Any]) -> None:
    """Fill in name/version/build/sha256, or set `problem`: the all-or-nothing precheck."""
    from rattler.package import IndexJson

    if pkg.size == 0:
        pkg.problem = "empty file"
        return
    if pkg.filename.endswith(".conda"):
        try:
            with zipfile.ZipFile(pkg.path) as archive:
                names = archive.namelist()
                bad = archive.testzip()
        except (zipfile.BadZipFile, OSError) as exc:
            pkg.problem = f"not a valid .conda archive ({exc})"
            return
        if bad is not None:
            pkg.problem = f"corrupt .conda archive (member {bad} fails its CRC check)"
            return
        if "metadata.json" not in names or not any(n.startswith("info-") for n in names):
            pkg.problem = "not a valid .conda archive (no metadata.json / info-*.tar.zst)"
            return
    try:
        index = IndexJson.from_package_archive(pkg.path)
    except Exception as exc:  # rattler raises its own exception types
        pkg.problem = f"not a valid conda archive ({one_line(exc, 120)})"
        return
    pkg.name = index.name.normalized
    pkg.version = str(index.version)
    pkg.build = str(index.build)
    ext = ".conda" if pkg.filename.endswith(".conda") else ".tar.bz2"
    expected = f"{pkg.name}-{pkg.version}-{pkg.build}{ext}"
    if pkg.filename != expected:
        pkg.problem = f"file name does not match its index.json (expected {expected})"
        return
    if index.subdir and index.subdir != pkg.subdir:
        pkg.problem = f"lies in {pkg.subdir}/ but its index.json says subdir {index.subdir}"
        return
    pkg.sha256 = sha256_of(pkg.path)
    record = indexed.get(pkg.filename)
    if record and record.get("sha256") and record["sha256"] != pkg.sha256:
        pkg.problem = "sha256 differs from the channel's repodata.json (file changed or truncated)"


# --------------------------------------------------------------------------------------------
# HTTP helpers (the function boundary the unit tests mock)
# --------------------------------------------------------------------------------------------


class NotFound(Exception):
    pass


def http_get_json(url: str, headers: dict[str, str] | None = None, what: str = "server") -> Any:
    """GET a JSON document; 404 -> NotFound, auth and connection failures -> one-line PipelineError."""
    request = urllib.request.Request(url, headers={"User-Agent": "causal-conv1d-conda-upload", **(headers or {})})
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


# --------------------------------------------------------------------------------------------
# Targets
# --------------------------------------------------------------------------------------------


class Target:
    """One upload destination. Subclasses resolve credentials, upload and read repodata."""

    name = ""
    label = ""
    env_var = ""

    def __init__(self, args: argparse.Namespace, env: dict[str, str]):
        self.args = args
        self.env = env
        self.auth_path, self.auth_data = load_auth_file(env)
        self.credential: Credential | None = None

    # ---- what and where
    def destination(self, pkg: LocalPackage) -> str:
        raise NotImplementedError

    def channel_display(self) -> str:
        raise NotImplementedError

    # ---- credentials
    def auth_keys(self) -> list[str]:
        return []

    def accepted_auth_kinds(self) -> Sequence[str]:
        return ("BearerToken",)

    def find_credential(self) -> Credential | None:
        value = self.env.get(self.env_var)
        if value:
            return Credential("token", f"${self.env_var}", token=register_secret(value))
        entry = auth_entry(self.auth_data, self.auth_keys())
        token = _token_from_entry(entry, self.accepted_auth_kinds())
        if token:
            return Credential("token", f"$RATTLER_AUTH_FILE[{self._matched_key()}]", token=register_secret(token))
        return None

    def _matched_key(self) -> str:
        for key in self.auth_keys():
            if key in self.auth_data:
                return key
        return next((k for k in self.auth_data if k.startswith("*.")), "?")

    def missing_credential_hint(self) -> str:
        keys = " or ".join(self.auth_keys()) or "the server's host"
        return (
            f"no credentials for {self.label}: set {self.env_var}, or add a "
            f"{'/'.join(self.accepted_auth_kinds())} entry for {keys} to $RATTLER_AUTH_FILE"
        )

    def resolve_credential(self) -> Credential:
        credential = self.find_credential()
        if credential is None:
            raise PipelineError(self.missing_credential_hint())
        self.credential = credential
        return credential

    def check_credential(self) -> None:
        """A cheap authenticated request, where the server has one, before anything is sent."""

    # ---- state on the server
    def repodata_url(self, subdir: str) -> str:
        raise NotImplementedError

    def read_headers(self) -> dict[str, str]:
        return {}

    def served(self, subdir: str) -> dict[str, str]:
        """filename -> sha256 of what the channel's repodata lists for `subdir` ({} if none yet)."""
        try:
            return repodata_filenames(http_get_json(self.repodata_url(subdir), self.read_headers(), self.label))
        except NotFound:
            return {}

    def upload(self, pkg: LocalPackage) -> None:
        raise NotImplementedError

    def after_upload(self, subdirs: set[str]) -> None:
        """Anything needed before the channel serves the new files (S3: indexing)."""


def _join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])


class PrefixTarget(Target):
    name = "prefix"
    label = "prefix.dev"
    env_var = "PREFIX_API_KEY"

    def channel_display(self) -> str:
        return _join(self.args.url, self.args.channel)

    def destination(self, pkg: LocalPackage) -> str:
        return _join(self.args.url, self.args.channel, pkg.subdir, pkg.filename)

    def auth_keys(self) -> list[str]:
        return host_keys(self.args.url)

    def find_credential(self) -> Credential | None:
        credential = super().find_credential()
        if credential is None and self.env.get("ACTIONS_ID_TOKEN_REQUEST_URL") and self.env.get(
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN"
        ):
            register_secret(self.env.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN"))
            return Credential("trusted-publishing", "GitHub Actions OIDC")
        return credential

    def missing_credential_hint(self) -> str:
        return (
            super().missing_credential_hint()
            + ", or run in GitHub Actions with `permissions: id-token: write` (trusted publishing)"
        )

    def repodata_url(self, subdir: str) -> str:
        return _join(self.args.url, self.args.channel, subdir, "repodata.json")

    def read_headers(self) -> dict[str, str]:
        if self.credential and self.credential.token:
            return {"Authorization": f"Bearer {self.credential.token}"}
        return {}

    def upload(self, pkg: LocalPackage) -> None:
        import rattler_build

        token = self.credential.token if self.credential else None
        rattler_build.upload_package_to_prefix(
            [str(pkg.path)],
            self.args.url,
            self.args.channel,
            api_key=token,  # None: rattler-build does the trusted-publishing exchange
            skip_existing=self.args.skip_existing,
        )


class AnacondaTarget(Target):
    name = "anaconda"
    label = "anaconda.org"
    env_var = "ANACONDA_API_KEY"

    def channel_display(self) -> str:
        return self.channel_base()

    def channel_base(self) -> str:
        base = _join(self.args.channel_url, self.args.owner)
        return base if self.args.label == "main" else _join(base, "label", self.args.label)

    def destination(self, pkg: LocalPackage) -> str:
        return _join(self.channel_base(), pkg.subdir, pkg.filename)

    def auth_keys(self) -> list[str]:
        return ["anaconda.org", *host_keys(self.args.url)]

    def accepted_auth_kinds(self) -> Sequence[str]:
        return ("CondaToken",)

    def check_credential(self) -> None:
        assert self.credential and self.credential.token
        try:
            http_get_json(
                _join(self.args.url, "user"), {"Authorization": f"token {self.credential.token}"}, self.label
            )
        except NotFound:
            pass

    def repodata_url(self, subdir: str) -> str:
        return _join(self.channel_base(), subdir, "repodata.json")

    def upload(self, pkg: LocalPackage) -> None:
        import rattler_build

        assert self.credential and self.credential.token
        rattler_build.upload_package_to_anaconda(
            [str(pkg.path)],
            self.args.owner,
            channel=[self.args.label],
            api_key=self.credential.token,
            url=self.args.url,
            force=False,
        )


class QuetzTarget(Target):
    name = "quetz"
    label = "quetz"
    env_var = "QUETZ_API_KEY"

    def channel_display(self) -> str:
        return _join(self.args.url, "get", self.args.channel)

    def destination(self, pkg: LocalPackage) -> str:
        return _join(self.args.url, "get", self.args.channel, pkg.subdir, pkg.filename)

    def auth_keys(self) -> list[str]:
        return host_keys(self.args.url)

    def accepted_auth_kinds(self) -> Sequence[str]:
        return ("CondaToken",)

    def read_headers(self) -> dict[str, str]:
        return {"X-API-Key": self.credential.token} if self.credential and self.credential.token else {}

    def check_credential(self) -> None:
        # /api/api-keys answers 401 to an unknown key (/api/me wants a browser session).
        keys = http_get_json(_join(self.args.url, "api/api-keys"), self.read_headers(), self.label)
        if not isinstance(keys, list):
            raise PipelineError(f"quetz at {self.args.url} did not accept the API key")
        try:
            http_get_json(_join(self.args.url, "api/channels", quote(self.args.channel)), self.read_headers(), "quetz")
        except NotFound as exc:
            raise PipelineError(
                f"quetz channel {self.args.channel!r} does not exist at {self.args.url} (create it first)"
            ) from exc

    def repodata_url(self, subdir: str) -> str:
        return _join(self.args.url, "get", self.args.channel, subdir, "repodata.json")

    def upload(self, pkg: LocalPackage) -> None:
        import rattler_build

        assert self.credential and self.credential.token
        rattler_build.upload_package_to_quetz(
            [str(pkg.path)], self.args.url, self.args.channel, api_key=self.credential.token
        )


class ArtifactoryTarget(Target):
    name = "artifactory"
    label = "artifactory"
    env_var = "ARTIFACTORY_TOKEN"

    def channel_display(self) -> str:
        return self.channel_base()

    def channel_base(self) -> str:
        return self.args.channel_url or _join(self.args.url, "api/conda", self.args.channel)

    def destination(self, pkg: LocalPackage) -> str:
        return _join(self.args.url, self.args.channel, pkg.subdir, pkg.filename)

    def auth_keys(self) -> list[str]:
        return host_keys(self.args.url)

    def accepted_auth_kinds(self) -> Sequence[str]:
        return ("BearerToken", "BasicHTTP")

    def read_headers(self) -> dict[str, str]:
        if self.credential and self.credential.token:
            return {"Authorization": f"Bearer {self.credential.token}"}
        return {}

    def repodata_url(self, subdir: str) -> str:
        return _join(self.channel_base(), subdir, "repodata.json")

    def upload(self, pkg: LocalPackage) -> None:
        import rattler_build

        assert self.credential and self.credential.token
        rattler_build.upload_package_to_artifactory(
            [str(pkg.path)], self.args.url, self.args.channel, token=self.credential.token
        )


class S3Target(Target):
    name = "s3"
    label = "S3"
    env_var = "AWS_ACCESS_KEY_ID"

    def __init__(self, args: argparse.Namespace, env: dict[str, str]):
        super().__init__(args, env)
        parsed = urlparse(args.channel)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise UsageError(f"--channel for s3 must look like s3://BUCKET/PATH, got {args.channel!r}")
        self.bucket = parsed.netloc
        self.prefix = parsed.path.strip("/")
        self.region = args.region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if not self.region:
            raise UsageError("s3 needs --region (or AWS_REGION in the environment)")
        self.endpoint = args.endpoint_url or f"https://s3.{self.region}.amazonaws.com"
        self._client: Any = None

    def key(self, subdir: str, filename: str) -> str:
        return "/".join(p for p in (self.prefix, subdir, filename) if p)

    def channel_display(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" + (f" (endpoint {self.endpoint})" if self.args.endpoint_url else "")

    def destination(self, pkg: LocalPackage) -> str:
        return f"s3://{self.bucket}/{self.key(pkg.subdir, pkg.filename)}"

    def auth_keys(self) -> list[str]:
        return [f"s3://{self.bucket}", self.bucket]

    def find_credential(self) -> Credential | None:
        key_id = self.env.get("AWS_ACCESS_KEY_ID")
        secret = self.env.get("AWS_SECRET_ACCESS_KEY")
        if key_id and secret:
            return Credential(
                "s3",
                "$AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY",
                access_key_id=register_secret(key_id),
                secret_access_key=register_secret(secret),
                session_token=register_secret(self.env.get("AWS_SESSION_TOKEN")),
            )
        entry = auth_entry(self.auth_data, self.auth_keys())
        creds = entry.get("S3Credentials") if isinstance(entry, dict) else None
        if isinstance(creds, dict) and creds.get("access_key_id") and creds.get("secret_access_key"):
            return Credential(
                "s3",
                f"$RATTLER_AUTH_FILE[{self._matched_key()}]",
                access_key_id=register_secret(creds["access_key_id"]),
                secret_access_key=register_secret(creds["secret_access_key"]),
                session_token=register_secret(creds.get("session_token")),
            )
        return None

    def missing_credential_hint(self) -> str:
        return (
            f"no credentials for s3://{self.bucket}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or add "
            f"an S3Credentials entry for s3://{self.bucket} to $RATTLER_AUTH_FILE"
        )

    def client(self) -> Any:
        if self._client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError as exc:
                raise PipelineError("the s3 target needs boto3: pip install boto3") from exc
            assert self.credential
            style = "path" if self.args.addressing_style == "path" else "virtual"
            self._client = boto3.client(
                "s3",
                endpoint_url=self.endpoint,
                region_name=self.region,
                aws_access_key_id=self.credential.access_key_id,
                aws_secret_access_key=self.credential.secret_access_key,
                aws_session_token=self.credential.session_token,
                config=Config(
                    s3={"addressing_style": style},
                    retries={"max_attempts": 2},
                    connect_timeout=10,
                    read_timeout=HTTP_TIMEOUT_S,
                ),
            )
        return self._client

    def _s3_error(self, exc: Exception, doing: str) -> PipelineError:
        from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

        if isinstance(exc, EndpointConnectionError):
            return PipelineError(f"cannot reach S3 at {self.endpoint}: {one_line(exc)}")
        if isinstance(exc, NoCredentialsError):
            return PipelineError(self.missing_credential_hint())
        if isinstance(exc, ClientError):
            code = str(exc.response.get("Error", {}).get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403") or status == 403:
                return PipelineError(f"S3 rejected the credentials ({code or status}) while {doing}")
            if code in ("NoSuchBucket", "404") and "bucket" in doing:
                return PipelineError(f"S3 bucket {self.bucket!r} does not exist at {self.endpoint}")
            return PipelineError(f"S3 error {code or status} while {doing}: {one_line(exc)}")
        return PipelineError(f"S3 failed while {doing}: {one_line(exc)}")

    def check_credential(self) -> None:
        try:
            self.client().head_bucket(Bucket=self.bucket)
        except Exception as exc:
            raise self._s3_error(exc, f"checking the bucket {self.bucket}") from exc

    def repodata_url(self, subdir: str) -> str:
        return f"s3://{self.bucket}/{self.key(subdir, 'repodata.json')}"

    def served(self, subdir: str) -> dict[str, str]:
        from botocore.exceptions import ClientError

        try:
            body = self.client().get_object(Bucket=self.bucket, Key=self.key(subdir, "repodata.json"))["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return {}
            raise self._s3_error(exc, f"reading {self.repodata_url(subdir)}") from exc
        except Exception as exc:
            raise self._s3_error(exc, f"reading {self.repodata_url(subdir)}") from exc
        return repodata_filenames(json.loads(body))

    def exists(self, pkg: LocalPackage) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client().head_object(Bucket=self.bucket, Key=self.key(pkg.subdir, pkg.filename))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return False
            raise self._s3_error(exc, f"looking for {pkg.filename}") from exc
        return True

    def upload(self, pkg: LocalPackage) -> None:
        with pkg.path.open("rb") as body:
            try:
                self.client().put_object(
                    Bucket=self.bucket,
                    Key=self.key(pkg.subdir, pkg.filename),
                    Body=body,
                    ContentType="application/octet-stream",
                )
            except Exception as exc:
                raise self._s3_error(exc, f"uploading {pkg.filename}") from exc

    def after_upload(self, subdirs: set[str]) -> None:
        from rattler import Subdir
        from rattler.index import S3Credentials, index_s3

        assert self.credential
        credentials = S3Credentials(
            endpoint_url=self.endpoint,
            region=self.region,
            access_key_id=self.credential.access_key_id,
            secret_access_key=self.credential.secret_access_key,
            session_token=self.credential.session_token,
            addressing_style="path" if self.args.addressing_style == "path" else "virtual-host",
        )
        channel = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        # conda needs noarch/repodata.json even when every package is linux-64; index_s3 always does noarch.
        for subdir in sorted(subdirs - {"noarch"}) or ["noarch"]:
            try:
                asyncio.run(index_s3(channel, credentials=credentials, target_platform=Subdir(subdir)))
            except Exception as exc:
                raise PipelineError(f"indexing {channel} ({subdir}) failed: {one_line(exc)}") from exc


TARGET_CLASSES: dict[str, type[Target]] = {
    cls.name: cls for cls in (PrefixTarget, AnacondaTarget, QuetzTarget, ArtifactoryTarget, S3Target)
}


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    pkg: LocalPackage
    status: str = "pending"
    detail: str = ""


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    def table(self) -> str:
        rows = [
            (o.pkg.filename, o.pkg.subdir, human_size(o.pkg.size), o.status, mask(o.detail)) for o in self.outcomes
        ]
        return format_table(["package", "subdir", "size", "status", "detail"], rows)


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad command line as one line (UsageError) instead of usage + exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def configure(parser: argparse.ArgumentParser) -> None:
    common = _Parser(add_help=False)
    common.add_argument(
        "--output-dir", default=str(DEFAULT_OUTPUT), help="local channel to upload from (default: output/)"
    )
    common.add_argument("--cuda", help="only packages for this CUDA version (a file in variants/, e.g. 13.0)")
    common.add_argument("--python", help="only packages for this Python X.Y")
    common.add_argument("--torch", help="only packages for this pytorch minor X.Y")
    common.add_argument("--dry-run", action="store_true", help="list what would go where; send nothing")
    common.add_argument(
        "--skip-existing", action="store_true", help="skip packages the channel already has (idempotent re-runs)"
    )
    common.add_argument(
        "--verify-timeout", type=float, default=180.0,
        help="seconds to wait for uploaded packages to appear in the channel's repodata (default 180)",
    )
    common.add_argument("--no-verify", action="store_true", help="do not wait for the repodata to list the uploads")

    sub = parser.add_subparsers(dest="target", metavar="TARGET", required=True)

    p = sub.add_parser("prefix", parents=[common], help="prefix.dev (API key or trusted publishing)")
    p.add_argument("--channel", required=True, help="prefix.dev channel name")
    p.add_argument("--url", default="https://prefix.dev", help="server URL (self-hosted instances)")

    p = sub.add_parser("anaconda", parents=[common], help="anaconda.org")
    p.add_argument("--owner", required=True, help="user or organisation on anaconda.org")
    p.add_argument("--label", default="main", help="channel label (default: main)")
    p.add_argument("--url", default="https://api.anaconda.org", help="API URL")
    p.add_argument("--channel-url", default="https://conda.anaconda.org", help="where channels are served from")

    p = sub.add_parser("quetz", parents=[common], help="a Quetz server")
    p.add_argument("--url", required=True, help="server URL, e.g. https://quetz.example.org")
    p.add_argument("--channel", required=True, help="channel name on the server")

    p = sub.add_parser("artifactory", parents=[common], help="a JFrog Artifactory conda repository")
    p.add_argument("--url", required=True, help="server URL, e.g. https://example.jfrog.io/artifactory")
    p.add_argument("--channel", required=True, help="repository key")
    p.add_argument("--channel-url", help="where the channel is served (default: URL/api/conda/CHANNEL)")

    p = sub.add_parser("s3", parents=[common], help="an S3 bucket (indexed after the upload)")
    p.add_argument("--channel", required=True, help="s3://BUCKET/PATH")
    p.add_argument("--endpoint-url", help="S3 endpoint (default: AWS for --region)")
    p.add_argument("--region", help="bucket region (default: $AWS_REGION)")
    p.add_argument(
        "--addressing-style", choices=["virtual-host", "path"], default="virtual-host",
        help="path for MinIO, moto and most S3 look-alikes",
    )


def wait_until_served(
    target: Target,
    expected: dict[str, LocalPackage],
    timeout_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, str]:
    """Poll the channel's repodata until every expected file is listed (bounded); filename -> problem."""
    deadline = clock() + timeout_s
    delay = 0.5
    pending = dict(expected)
    problems: dict[str, str] = {}
    while True:
        for subdir in sorted({p.subdir for p in pending.values()}):
            listed = target.served(subdir)
            for filename, pkg in list(pending.items()):
                if pkg.subdir == subdir and filename in listed:
                    if listed[filename] and pkg.sha256 and listed[filename] != pkg.sha256:
                        problems[filename] = "served with a different sha256"
                    del pending[filename]
        if not pending or clock() >= deadline:
            break
        sleep(min(delay, max(0.0, deadline - clock())))
        delay = min(delay * 2, 5.0)
    for filename in pending:
        problems[filename] = f"not listed in {target.repodata_url(expected[filename].subdir)} after {timeout_s:.0f}s"
    return problems


def run(args: argparse.Namespace, env: dict[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)
    output_dir = Path(args.output_dir).resolve()
    selection = Selection(cuda=args.cuda, python=args.python, torch=args.torch)

    target = TARGET_CLASSES[args.target](args, env)
    packages = find_packages(output_dir)
    if not packages:
        raise UsageError(f"no .conda or .tar.bz2 packages in {output_dir}")
    chosen = filter_packages(packages, selection)
    if not chosen:
        raise UsageError(
            f"no package in {output_dir} matches the selectors; found: "
            + ", ".join(p.filename for p in packages[:6]) + (" ..." if len(packages) > 6 else "")
        )

    # 1. all-or-nothing precheck of the archives
    indexed_cache: dict[str, dict[str, Any]] = {}
    for pkg in chosen:
        indexed = indexed_cache.setdefault(pkg.subdir, local_repodata(output_dir, pkg.subdir))
        check_package(pkg, indexed)
    report = Report([Outcome(p) for p in chosen])
    invalid = [o for o in report.outcomes if o.pkg.problem]
    if invalid:
        for o in report.outcomes:
            o.status, o.detail = ("invalid", o.pkg.problem or "") if o.pkg.problem else ("not attempted", "")
        print(report.table())
        first = invalid[0].pkg
        raise PipelineError(
            f"{first.path.relative_to(output_dir)}: {first.problem}"
            + (f" (and {len(invalid) - 1} more invalid)" if len(invalid) > 1 else "")
            + "; nothing was uploaded"
        )

    # 2. credentials (nothing is contacted in a dry run)
    credential = target.find_credential()
    if args.dry_run:
        print(f"dry run: {len(chosen)} package(s) from {output_dir} to {args.target} {target.channel_display()}")
        found = credential.describe() if credential else f"none found ({target.missing_credential_hint()})"
        print(f"credentials: {found}")
        rows = [(p.filename, human_size(p.size), target.destination(p)) for p in chosen]
        print(format_table(["package", "size", "destination"], rows))
        return 0
    if credential is None:
        raise PipelineError(target.missing_credential_hint())
    target.credential = credential
    print(f"uploading {len(chosen)} package(s) to {args.target} {target.channel_display()} "
          f"with {credential.describe()}", flush=True)
    target.check_credential()

    # 3. what the channel already has (also proves the server is reachable)
    present: dict[str, str] = {}
    for subdir in sorted({p.subdir for p in chosen}):
        present.update(target.served(subdir))
    if isinstance(target, S3Target):
        present.update({p.filename: "" for p in chosen if p.filename not in present and target.exists(p)})
    existing = [o for o in report.outcomes if o.pkg.filename in present]
    for o in existing:
        same = not present[o.pkg.filename] or present[o.pkg.filename] == o.pkg.sha256
        o.detail = "already in the channel" + ("" if same else " with a different sha256")
        o.status = "skipped" if args.skip_existing else "exists"
    if existing and not args.skip_existing:
        for o in report.outcomes:
            if o.status == "pending":
                o.status = "not attempted"
        print(report.table())
        raise PipelineError(
            f"{len(existing)} package(s) already in {target.channel_display()} "
            f"({existing[0].pkg.filename}{', ...' if len(existing) > 1 else ''}); "
            "pass --skip-existing to skip them; nothing was uploaded"
        )

    # 4. upload, stopping at the first failure
    failure: str | None = None
    for o in report.outcomes:
        if o.status != "pending":
            continue
        if failure:
            o.status = "not attempted"
            continue
        print(f"uploading {o.pkg.filename} ({human_size(o.pkg.size)})", flush=True)
        try:
            target.upload(o.pkg)
        except PipelineError as exc:
            o.status, o.detail, failure = "failed", one_line(exc), f"{o.pkg.filename}: {one_line(exc)}"
        except Exception as exc:  # rattler_build.UploadError / AuthError and friends
            o.status, o.detail, failure = "failed", one_line(exc), f"{o.pkg.filename}: {one_line(exc)}"
        else:
            o.status = "uploaded"

    # 5. make it served, then check that it is
    uploaded = {o.pkg.filename: o.pkg for o in report.outcomes if o.status == "uploaded"}
    if uploaded or (args.skip_existing and existing):
        try:
            target.after_upload({p.subdir for p in chosen})
        except PipelineError as exc:
            failure = failure or one_line(exc)
    if uploaded and not args.no_verify:
        problems = wait_until_served(target, uploaded, args.verify_timeout)
        for o in report.outcomes:
            if o.pkg.filename in problems:
                o.status, o.detail = "not served", problems[o.pkg.filename]
            elif o.pkg.filename in uploaded:
                o.detail = "listed in the channel's repodata"
        if problems and not failure:
            name, why = next(iter(problems.items()))
            failure = f"{name}: uploaded but {why}"

    print(report.table())
    counts = {s: sum(o.status == s for o in report.outcomes) for s in ("uploaded", "skipped")}
    if failure:
        went = [o.pkg.filename for o in report.outcomes if o.status == "uploaded"]
        raise PipelineError(f"{failure} ({len(went)} of {len(report.outcomes)} uploaded)")
    print(f"done: {counts['uploaded']} uploaded, {counts['skipped']} skipped, to {target.channel_display()}")
    return 0

