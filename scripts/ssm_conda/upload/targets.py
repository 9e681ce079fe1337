"""Upload destinations, a frozen dataclass per server whose `option` fields are its command line (S3: boto3 uploads, py-rattler
indexes; others: py-rattler-build). Credentials come from the environment or rattler's auth storage, never options; all masked."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import re
import sys
import urllib.error
import urllib.request
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

import boto3
import rattler_build
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError
from rattler import Subdir
from rattler.index import S3Credentials, index_s3

from ssm_conda.channels import fetch_repodata, rattler_client
from ssm_conda.console import PipelineError, UsageError
from ssm_conda.upload.archives import LocalPackage, repodata_filenames

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # Python 3.10 (pyproject.toml's requires-python)
    from typing_extensions import dataclass_transform

AUTH_FAILURE_RE = re.compile(r"\b40[13]\b|unauthori[sz]ed|forbidden|api key|token|credential|keychain", re.I)
NOT_AUTH_RE = re.compile(r"cannot reach|connect|resolve|dns|timed? ?out|unreachable|sending request|\b5\d\d\b", re.I)
HTTP_TIMEOUT_S = 30
NAME_RE = re.compile(r"(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._-]*")  # one path component on the server: a channel, label, bucket
NAME_RULE = "letters, digits, '.', '_' and '-', starting with a letter or digit, without '..'"
_SECRETS: set[str] = set()


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


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])


def http_url(value: str) -> str:
    """The type of --url and the like: http(s) with a host (and a valid port); a password in it is never shown."""
    with contextlib.suppress(ValueError):  # a bad port or IPv6 address
        if (parsed := urlparse(value)).scheme in ("http", "https") and parsed.hostname and parsed.port != 0:
            register_secret(parsed.password)
            return value
    raise argparse.ArgumentTypeError(f"{mask(value)!r} is not an http(s) URL with a host, e.g. https://quetz.example.org")


def http_get_json(url: str, headers: dict[str, str], what: str) -> Any:
    """GET a JSON document (None for 404); a refusal or no answer is one line."""
    request = urllib.request.Request(url, headers={"User-Agent": "ssm-conda-upload", **headers})
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        if exc.code in (401, 403):
            raise PipelineError(f"{what} rejected the credentials (HTTP {exc.code}) for {mask(url)}") from exc
        raise PipelineError(f"{what} answered HTTP {exc.code} for {mask(url)}") from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise PipelineError(f"cannot reach {what} at {mask(url)}: {one_line(getattr(exc, 'reason', exc))}") from exc
    except ValueError as exc:
        raise PipelineError(f"{what} sent something that is not JSON for {mask(url)}") from exc


def listed_in(channel_url: str, subdir: str, headers: dict[str, str]) -> dict[str, str]:
    """filename -> sha256 of what the channel lists for `subdir` ({} while it has none), through py-rattler."""
    try:
        repodata = fetch_repodata(channel_url, subdir, headers)
    except PipelineError as exc:
        raise PipelineError(one_line(exc)) from exc
    records = repodata.load_all_records() if repodata is not None else []
    return {r.file_name: r.sha256.hex() if r.sha256 else "" for r in records}


def option(help: str | None, default: Any = MISSING, env: tuple[str, ...] = (), **argparse_kwargs: Any) -> Any:
    """A field given as --NAME where it has a help (required without a default), else by the first of `env` set."""
    return field(default=default, metadata={"env": env, **({"cli": {"help": help, **argparse_kwargs}} if help else {})})


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(field, option))
@dataclass(frozen=True, kw_only=True)
class Target:
    """One upload destination: `to` names it on the server (a channel, an owner, a repository, a bucket)."""

    name = ""
    server = ""  # in messages
    help = ""
    env_var = ""  # the key in the environment
    login_flag = "--token"  # of `rattler-build auth login`: the kind of credential the server takes ("": none)
    trusted = False  # whether rattler-build authenticates by itself (prefix.dev's trusted publishing)
    read_header = ("Authorization", "Bearer ")  # the header our reads send the key in, and its prefix (None: no key)
    named = ("to",)  # the fields that name one thing on the server, joined into its URLs: never a path

    def __init_subclass__(cls, **names: Any) -> None:
        """A server's class keywords set the names above; its fields make it a frozen dataclass too."""
        super().__init_subclass__()
        for attr, value in names.items():
            setattr(cls, attr, value)
        dataclass(frozen=True, kw_only=True)(cls)

    to: str
    url: str = ""
    key: str | None = None  # $env_var: handed to rattler-build and sent with our reads

    def __post_init__(self) -> None:
        for option in self.named:
            if not NAME_RE.fullmatch(value := getattr(self, option)):
                raise UsageError(f"--{option} {mask(value)!r} is not one name on {self.server}; accepted: {NAME_RULE}")

    def host(self) -> str:
        """What rattler's auth storage knows the server by."""
        return urlparse(self.url).hostname or self.url

    def channel(self) -> str:
        """Where the channel is served: SUBDIR/repodata.json and SUBDIR/FILENAME below it."""
        raise NotImplementedError

    def channel_display(self) -> str:
        return mask(self.channel())

    def destination(self, pkg: LocalPackage) -> str:
        return mask(join(self.channel(), pkg.subdir, pkg.filename))

    def repodata_url(self, subdir: str) -> str:
        return mask(join(self.channel(), subdir, "repodata.json"))

    def find_credential(self) -> str | None:
        """Where the credential comes from (never its value), or None."""
        rattler_client()
        if register_secret(self.key):
            return f"${self.env_var} (****)"
        try:  # given no files and no key, rattler-build only looks for a credential in its auth storage
            self.rattler_upload([], None)
        except rattler_build.RattlerBuildError:
            return None
        return "rattler's auth storage ($RATTLER_AUTH_FILE, keyring, ~/.rattler/credentials.json or ~/.netrc)"

    def login_command(self) -> str:
        return f"`rattler-build auth login {self.host()} {self.login_flag} TOKEN` (or `pixi auth login` likewise)"

    def missing_credential_hint(self) -> str:
        return f"no credentials for {self.server}: set {self.env_var}, or log in with {self.login_command()}"

    def explain_refusal(self, message: str, unclear_may_be_auth: bool = True) -> str:
        """An error of the upload or the credential check, with what to do about credentials. rattler-build's Quetz and
        Artifactory errors lack the status: with a stored credential the hint is given unless the error is clearly another."""
        if self.trusted or not self.login_flag:
            return message
        refused = AUTH_FAILURE_RE.search(message)
        if self.key:
            return f"{message} (${self.env_var} was refused)" if refused else message
        if not refused and (not unclear_may_be_auth or NOT_AUTH_RE.search(message)):
            return message
        unclear = "" if refused else f"if {self.host()} refused the stored credential, "
        return f"{message}; {unclear}log in with {self.login_command()}, or set {self.env_var}"

    def check_credential(self) -> None:
        """A cheap authenticated request, where the server has one, before anything is sent."""

    def read_headers(self) -> dict[str, str]:
        """Our reads carry the key from the environment; rattler's client adds what its auth storage holds."""
        return {self.read_header[0]: self.read_header[1] + self.key} if self.key and self.read_header else {}

    def served(self, subdir: str) -> dict[str, str]:
        return listed_in(self.channel(), subdir, self.read_headers())

    def rattler_upload(self, files: list[str], key: str | None) -> None:
        """The py-rattler-build call. Without a key it looks the credential up in its auth storage."""
        raise NotImplementedError

    def upload(self, pkg: LocalPackage) -> None:
        self.rattler_upload([str(pkg.path)], self.key)

    def after_upload(self, subdirs: set[str]) -> None:
        """Anything needed before the channel serves the new files (S3: indexing)."""


class PrefixTarget(Target, name="prefix", server="prefix.dev", env_var="PREFIX_API_KEY",
                   help="prefix.dev: $PREFIX_API_KEY, a stored BearerToken, or trusted publishing in GitHub Actions"):
    to: str = option("the prefix.dev channel to upload to", metavar="CHANNEL")
    url: str = option("server URL (self-hosted instances; default: https://prefix.dev)", "https://prefix.dev", type=http_url)
    generate_attestation: bool = option("sign a sigstore attestation of each package (GitHub Actions, id-token: write)",
                                        False, action="store_true")
    skip_existing: bool = False
    oidc_url: str | None = option(None, None, env=("ACTIONS_ID_TOKEN_REQUEST_URL",))
    oidc_token: str | None = option(None, None, env=("ACTIONS_ID_TOKEN_REQUEST_TOKEN",))

    def channel(self) -> str:
        return join(self.url, self.to)

    @property
    def trusted(self) -> bool:
        """Trusted publishing: in GitHub Actions with id-token: write and no key, rattler-build does the exchange."""
        return bool(self.oidc_url and self.oidc_token) and not self.key

    def find_credential(self) -> str | None:
        rattler_client()  # rattler-build and our reads use it with trusted publishing too
        if self.generate_attestation and not (self.oidc_url and self.oidc_token):
            raise UsageError("--generate-attestation signs with the workflow's identity: run it in GitHub Actions "
                             "with `permissions: id-token: write`")
        if self.trusted:
            register_secret(self.oidc_token)
            return "trusted publishing (GitHub Actions OIDC)"
        return super().find_credential()

    def missing_credential_hint(self) -> str:
        trusted = ", or run in GitHub Actions with `permissions: id-token: write` (trusted publishing)"
        return super().missing_credential_hint() + trusted

    def rattler_upload(self, files: list[str], key: str | None) -> None:
        rattler_build.upload_package_to_prefix(files, self.url, self.to, api_key=key, skip_existing=self.skip_existing,
                                               generate_attestation=self.generate_attestation)


class AnacondaTarget(Target, name="anaconda", server="anaconda.org", env_var="ANACONDA_API_KEY", login_flag="--conda-token",
                     named=("to", "label"),
                     read_header=None,  # channels are read anonymously (a private one would need /t/TOKEN/ in the URL)
                     help="anaconda.org: $ANACONDA_API_KEY, or a stored CondaToken for api.anaconda.org"):
    to: str = option("the user or organisation on anaconda.org to upload to", metavar="OWNER")
    label: str = option("channel label (default: main)", "main")
    url: str = option("API URL (default: https://api.anaconda.org)", "https://api.anaconda.org", type=http_url)
    channel_url: str | None = option("where the channel is served, read back after the upload "
                                     "(default: https://conda.anaconda.org/OWNER, /label/LABEL below it)", None, type=http_url)

    def channel(self) -> str:
        owner = join("https://conda.anaconda.org", self.to)
        return self.channel_url or (owner if self.label == "main" else join(owner, "label", self.label))

    def rattler_upload(self, files: list[str], key: str | None) -> None:
        rattler_build.upload_package_to_anaconda(files, self.to, channel=[self.label], api_key=key, url=self.url, force=False)


class QuetzTarget(Target, name="quetz", server="quetz", env_var="QUETZ_API_KEY", login_flag="--conda-token",
                  help="a Quetz server: $QUETZ_API_KEY, or a stored CondaToken for its host", read_header=("X-API-Key", "")):
    to: str = option("the channel on the server to upload to", metavar="CHANNEL")
    url: str = option("server URL, e.g. https://quetz.example.org", type=http_url)

    def channel(self) -> str:
        return join(self.url, "get", self.to)

    def check_credential(self) -> None:
        if not self.read_headers():
            return  # a key only rattler-build can see: it is checked by the upload itself
        # /api/api-keys answers 401 to an unknown key (/api/me wants a browser session).
        if not isinstance(http_get_json(join(self.url, "api/api-keys"), self.read_headers(), self.server), list):
            raise PipelineError(f"quetz at {mask(self.url)} did not accept the API key")
        if http_get_json(join(self.url, "api/channels", quote(self.to)), self.read_headers(), self.server) is None:
            raise PipelineError(f"quetz channel {self.to!r} does not exist at {mask(self.url)} (create it first)")

    def rattler_upload(self, files: list[str], key: str | None) -> None:
        rattler_build.upload_package_to_quetz(files, self.url, self.to, api_key=key)


class ArtifactoryTarget(Target, name="artifactory", server="artifactory", env_var="ARTIFACTORY_TOKEN", help="a JFrog "
                        "Artifactory conda repository: $ARTIFACTORY_TOKEN, or a stored BearerToken or BasicHTTP entry"):
    to: str = option("the repository key to upload to", metavar="REPO")
    url: str = option("server URL, e.g. https://example.jfrog.io/artifactory", type=http_url)
    channel_url: str | None = option("where the channel is served, read back after the upload "
                                     "(default: URL/api/conda/REPO)", None, type=http_url)

    def channel(self) -> str:
        return self.channel_url or join(self.url, "api/conda", self.to)

    def destination(self, pkg: LocalPackage) -> str:
        return join(self.url, self.to, pkg.subdir, pkg.filename)

    def rattler_upload(self, files: list[str], key: str | None) -> None:
        rattler_build.upload_package_to_artifactory(files, self.url, self.to, token=key)


class S3Target(Target, name="s3", server="S3", env_var="AWS_ACCESS_KEY_ID", login_flag="",
               help="an S3 bucket, indexed after the upload: the AWS credential chain (AWS_ACCESS_KEY_ID + "
                    "AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ...)"):
    to: str = option("the bucket and path to upload to", metavar="s3://BUCKET/PATH")
    endpoint_url: str | None = option("S3 endpoint (default: AWS for --region)", None, type=http_url)
    region: str | None = option("bucket region (default: $AWS_REGION)", None, env=("AWS_REGION", "AWS_DEFAULT_REGION"))
    addressing_style: str = option("path for MinIO, moto and most S3 look-alikes", "virtual-host",
                                   choices=["virtual-host", "path"])

    def __post_init__(self) -> None:
        parsed = urlparse(self.to)
        names = f"{parsed.netloc}{parsed.path.rstrip('/')}".split("/")  # the bucket, then each part of PATH
        if parsed.scheme != "s3" or not all(map(NAME_RE.fullmatch, names)) or parsed.query or parsed.fragment:
            raise UsageError(f"--to for s3 must look like s3://BUCKET/PATH, got {mask(self.to)!r}; accepted in the bucket "
                             f"and each part of PATH: {NAME_RULE}")
        if not self.region:
            raise UsageError("s3 needs --region (or AWS_REGION in the environment)")

    @property
    def bucket(self) -> str:
        return urlparse(self.to).netloc

    @property
    def endpoint(self) -> str:
        return self.endpoint_url or f"https://s3.{self.region}.amazonaws.com"

    def channel(self) -> str:
        return f"s3://{self.bucket}/{self.object_key()}".rstrip("/")

    def channel_display(self) -> str:
        return mask(self.channel() + (f" (endpoint {self.endpoint})" if self.endpoint_url else ""))

    def object_key(self, *parts: str) -> str:
        """The key of PATH/PARTS in the bucket (PATH alone without parts)."""
        return "/".join(p for p in (urlparse(self.to).path.strip("/"), *parts) if p)

    def find_credential(self) -> str | None:
        found = boto3.Session().get_credentials()
        if found is None:
            return None
        keys = found.get_frozen_credentials()
        for secret in (keys.access_key, keys.secret_key, keys.token):
            register_secret(secret)
        return f"the AWS credential chain ({found.method})"

    def missing_credential_hint(self) -> str:
        return (f"no credentials for s3://{self.bucket}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                "AWS_PROFILE (the AWS credential chain, as boto3 reads it)")

    @functools.cached_property
    def client(self) -> Any:
        config = Config(s3={"addressing_style": "path" if self.addressing_style == "path" else "virtual"},
                        retries={"max_attempts": 2}, connect_timeout=10, read_timeout=HTTP_TIMEOUT_S)
        return boto3.client("s3", endpoint_url=self.endpoint, region_name=self.region, config=config)  # the same chain

    def _call(self, doing: str, method: str, missing_ok: bool = False, **kwargs: Any) -> Any:
        """A boto3 client method on the bucket, its failure as one line; None where `missing_ok` and the key is absent."""
        try:
            return getattr(self.client, method)(Bucket=self.bucket, **kwargs)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if missing_ok and code in ("NoSuchKey", "404", "NotFound"):
                return None
            if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied") or status == 403:
                raise PipelineError(f"S3 rejected the credentials ({code or status}) while {doing}") from exc
            if code in ("NoSuchBucket", "404") and method == "head_bucket":
                raise PipelineError(f"S3 bucket {self.bucket!r} does not exist at {mask(self.endpoint)}") from exc
            raise PipelineError(f"S3 error {code or status} while {doing}: {one_line(exc)}") from exc
        except EndpointConnectionError as exc:
            raise PipelineError(f"cannot reach S3 at {mask(self.endpoint)}: {one_line(exc)}") from exc
        except BotoCoreError as exc:  # botocore's other errors (timeouts, ...)
            raise PipelineError(f"S3 failed while {doing}: {one_line(exc)}") from exc

    def check_credential(self) -> None:
        self._call(f"checking the bucket {self.bucket}", "head_bucket")

    def served(self, subdir: str) -> dict[str, str]:
        key = self.object_key(subdir, "repodata.json")
        response = self._call(f"reading {self.repodata_url(subdir)}", "get_object", True, Key=key)
        return repodata_filenames(json.loads(response["Body"].read())) if response else {}

    def upload(self, pkg: LocalPackage) -> None:
        with Path(pkg.path).open("rb") as body:
            self._call(f"uploading {pkg.filename}", "put_object", Key=self.object_key(pkg.subdir, pkg.filename),
                       Body=body, ContentType="application/octet-stream")

    def after_upload(self, subdirs: set[str]) -> None:
        keys = boto3.Session().get_credentials().get_frozen_credentials()
        credentials = S3Credentials(endpoint_url=self.endpoint, region=self.region, access_key_id=keys.access_key,
                                    secret_access_key=keys.secret_key, session_token=keys.token,
                                    addressing_style=self.addressing_style)
        for subdir in sorted(subdirs - {"noarch"}) or ["noarch"]:  # index_s3 does noarch/ too, which conda needs
            try:
                asyncio.run(index_s3(self.channel(), credentials=credentials, target_platform=Subdir(subdir)))
            except Exception as exc:
                raise PipelineError(f"indexing {self.channel()} ({subdir}) failed: {one_line(exc)}") from exc

