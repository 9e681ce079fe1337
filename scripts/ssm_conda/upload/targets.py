"""Upload destinations served over HTTP: one small class per server, uploads through py-rattler-build.

A target says where packages go and where its repodata is read, which credential it takes, and
how to log in when there is none. S3 lives in s3.py.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

import rattler_build

from ssm_conda.console import PipelineError
from ssm_conda.upload.archives import LocalPackage
from ssm_conda.upload.credentials import Credential, credential_from_entry, read_auth_file, register_secret, stored_entry
from ssm_conda.upload.served import NotFound, http_get_json, repodata_filenames

AUTH_FAILURE_RE = re.compile(r"\b40[13]\b|unauthori[sz]ed|forbidden|api key|token|credential|keychain", re.I)
TRUSTED_PUBLISHING = "trusted publishing (GitHub Actions OIDC)"
NOT_AUTH_RE = re.compile(r"cannot reach|connect|resolve|dns|timed? ?out|unreachable|sending request|\b5\d\d\b", re.I)


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])


class Target:
    """One upload destination."""

    name = ""
    label = ""
    help = ""
    env_var = ""
    auth_kinds: tuple[str, ...] = ("BearerToken",)

    def __init__(self, args: argparse.Namespace, env: dict[str, str]):
        self.args = args
        self.env = env
        self.auth_file, self.auth_entries = read_auth_file(env)
        self.credential: Credential | None = None
        self._unusable: tuple[str, Any] | None = None  # an auth-file entry of a kind we cannot use

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser) -> None:
        raise NotImplementedError

    # ---- where
    def server_url(self) -> str:
        """The URL rattler-build looks the credential up by."""
        return self.args.url

    def host(self) -> str:
        return urlparse(self.server_url()).hostname or self.server_url()

    def channel_url(self) -> str:
        """Where the channel is served: SUBDIR/repodata.json and SUBDIR/FILENAME below it."""
        raise NotImplementedError

    def channel_display(self) -> str:
        return self.channel_url()

    def destination(self, pkg: LocalPackage) -> str:
        return join(self.channel_url(), pkg.subdir, pkg.filename)

    def repodata_url(self, subdir: str) -> str:
        return join(self.channel_url(), subdir, "repodata.json")

    # ---- credentials
    def find_credential(self) -> Credential | None:
        value = self.env.get(self.env_var)
        if value:
            return Credential(f"${self.env_var}", token=register_secret(value), passed=True)
        found = stored_entry(self.auth_entries, self.server_url())
        if found:
            credential = credential_from_entry(*found, self.auth_kinds, self.auth_file)
            if credential is None:
                self._unusable = found  # rattler-build stops at this entry too
            return credential
        if self.rattler_finds_credential():
            return Credential("rattler-build's auth storage (keyring, ~/.rattler/credentials.json or ~/.netrc)")
        return None

    def rattler_finds_credential(self) -> bool:
        """Whether rattler-build finds a credential for this server in its auth storage: its upload
        functions look the credential up before they touch the files, so given none they send nothing."""
        try:
            self.rattler_upload([], None, None)
        except rattler_build.RattlerBuildError:
            return False
        return True

    def login_command(self) -> str:
        flag = "--conda-token" if self.auth_kinds[0] == "CondaToken" else "--token"
        return f"`rattler-build auth login {self.host()} {flag} TOKEN` (or `pixi auth login` likewise)"

    def missing_credential_hint(self) -> str:
        hint = f"no credentials for {self.label}: set {self.env_var}, or log in with {self.login_command()}"
        if self._unusable:
            key, entry = self._unusable
            holds = "/".join(entry) if isinstance(entry, dict) and entry else "nothing usable"
            hint += f"; $RATTLER_AUTH_FILE[{key}] holds {holds}, {self.label} takes {'/'.join(self.auth_kinds)}"
        return hint

    def explain_refusal(self, message: str, unclear_may_be_auth: bool = True) -> str:
        """An error of the upload or of the credential check, with what to do about credentials. rattler-build's
        Quetz and Artifactory errors do not say the status ("Server responded with error"): with a stored
        credential the hint is given unless the error is clearly another."""
        credential = self.credential
        if credential and credential.passed:
            return f"{message} ({credential.source} was refused)" if AUTH_FAILURE_RE.search(message) else message
        if credential and credential.source == TRUSTED_PUBLISHING:
            return message
        if AUTH_FAILURE_RE.search(message):
            return f"{message}; log in with {self.login_command()}, or set {self.env_var}"
        if not unclear_may_be_auth or NOT_AUTH_RE.search(message):
            return message
        return f"{message}; if {self.host()} refused the stored credential, log in with {self.login_command()}, " \
               f"or set {self.env_var}"

    def check_credential(self) -> None:
        """A cheap authenticated request, where the server has one, before anything is sent."""

    # ---- state on the server
    def read_headers(self) -> dict[str, str]:
        """Our repodata reads carry the credential where we know it (a keyring entry we do not)."""
        credential = self.credential
        if not credential or not credential.token:
            return {}
        if credential.username is not None:
            pair = base64.b64encode(f"{credential.username}:{credential.token}".encode()).decode()
            return {"Authorization": f"Basic {pair}"}
        return {"Authorization": f"Bearer {credential.token}"}

    def served(self, subdir: str) -> dict[str, str]:
        """filename -> sha256 of what the channel's repodata lists for `subdir` ({} if none yet)."""
        try:
            return repodata_filenames(http_get_json(self.repodata_url(subdir), self.read_headers(), self.label))
        except NotFound:
            return {}

    def already_present(self, packages: Sequence[LocalPackage]) -> dict[str, str]:
        subdirs = sorted({p.subdir for p in packages})
        return {name: sha256 for subdir in subdirs for name, sha256 in self.served(subdir).items()}

    # ---- sending
    def rattler_upload(self, files: list[str], key: str | None, auth_file: Path | None) -> None:
        """The py-rattler-build call. Without a key it looks the credential up itself: in `auth_file`
        where we found it there, else in its whole auth storage."""
        raise NotImplementedError

    def upload(self, pkg: LocalPackage) -> None:
        credential = self.credential or Credential("")
        self.rattler_upload([str(pkg.path)], credential.token if credential.passed else None, credential.auth_file)

    def after_upload(self, subdirs: set[str]) -> None:
        """Anything needed before the channel serves the new files (S3: indexing)."""


class PrefixTarget(Target):
    name = "prefix"
    help = "prefix.dev (API key, login or trusted publishing)"
    label = "prefix.dev"
    env_var = "PREFIX_API_KEY"

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--channel", required=True, help="prefix.dev channel name")
        parser.add_argument("--url", default="https://prefix.dev", help="server URL (self-hosted instances)")

    def channel_url(self) -> str:
        return join(self.args.url, self.args.channel)

    def find_credential(self) -> Credential | None:
        oidc = self.env.get("ACTIONS_ID_TOKEN_REQUEST_URL") and self.env.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
        if oidc and not self.env.get(self.env_var):
            register_secret(oidc)
            return Credential(TRUSTED_PUBLISHING)  # rattler-build does the exchange
        return super().find_credential()

    def missing_credential_hint(self) -> str:
        trusted = ", or run in GitHub Actions with `permissions: id-token: write` (trusted publishing)"
        return super().missing_credential_hint() + trusted

    def rattler_upload(self, files: list[str], key: str | None, auth_file: Path | None) -> None:
        rattler_build.upload_package_to_prefix(files, self.args.url, self.args.channel, api_key=key, auth_file=auth_file,
                                               skip_existing=self.args.skip_existing)


class AnacondaTarget(Target):
    name = "anaconda"
    help = "anaconda.org"
    label = "anaconda.org"
    env_var = "ANACONDA_API_KEY"
    auth_kinds = ("CondaToken",)

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--owner", required=True, help="user or organisation on anaconda.org")
        parser.add_argument("--label", default="main", help="channel label (default: main)")
        parser.add_argument("--url", default="https://api.anaconda.org", help="API URL")
        parser.add_argument("--channel-url", default="https://conda.anaconda.org", help="where channels are served from")

    def channel_url(self) -> str:
        base = join(self.args.channel_url, self.args.owner)
        return base if self.args.label == "main" else join(base, "label", self.args.label)

    def read_headers(self) -> dict[str, str]:
        return {}  # channels are read anonymously (a private one would need /t/TOKEN/ in the URL)

    def check_credential(self) -> None:
        if self.credential and self.credential.token:
            with contextlib.suppress(NotFound):  # an API without /user
                http_get_json(join(self.args.url, "user"), {"Authorization": f"token {self.credential.token}"}, self.label)

    def rattler_upload(self, files: list[str], key: str | None, auth_file: Path | None) -> None:
        rattler_build.upload_package_to_anaconda(files, self.args.owner, channel=[self.args.label], api_key=key,
                                                 url=self.args.url, force=False, auth_file=auth_file)


class QuetzTarget(Target):
    name = "quetz"
    help = "a Quetz server"
    label = "quetz"
    env_var = "QUETZ_API_KEY"
    auth_kinds = ("CondaToken",)

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--url", required=True, help="server URL, e.g. https://quetz.example.org")
        parser.add_argument("--channel", required=True, help="channel name on the server")

    def channel_url(self) -> str:
        return join(self.args.url, "get", self.args.channel)

    def read_headers(self) -> dict[str, str]:
        return {"X-API-Key": self.credential.token} if self.credential and self.credential.token else {}

    def check_credential(self) -> None:
        if not self.read_headers():
            return  # a key only rattler-build can see: it is checked by the upload itself
        # /api/api-keys answers 401 to an unknown key (/api/me wants a browser session).
        if not isinstance(http_get_json(join(self.args.url, "api/api-keys"), self.read_headers(), self.label), list):
            raise PipelineError(f"quetz at {self.args.url} did not accept the API key")
        try:
            http_get_json(join(self.args.url, "api/channels", quote(self.args.channel)), self.read_headers(), self.label)
        except NotFound as exc:
            message = f"quetz channel {self.args.channel!r} does not exist at {self.args.url} (create it first)"
            raise PipelineError(message) from exc

    def rattler_upload(self, files: list[str], key: str | None, auth_file: Path | None) -> None:
        rattler_build.upload_package_to_quetz(files, self.args.url, self.args.channel, api_key=key, auth_file=auth_file)


class ArtifactoryTarget(Target):
    name = "artifactory"
    help = "a JFrog Artifactory conda repository"
    label = "artifactory"
    env_var = "ARTIFACTORY_TOKEN"
    auth_kinds = ("BearerToken", "BasicHTTP")

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--url", required=True, help="server URL, e.g. https://example.jfrog.io/artifactory")
        parser.add_argument("--channel", required=True, help="repository key")
        parser.add_argument("--channel-url", help="where the channel is served (default: URL/api/conda/CHANNEL)")

    def channel_url(self) -> str:
        return self.args.channel_url or join(self.args.url, "api/conda", self.args.channel)

    def destination(self, pkg: LocalPackage) -> str:
        return join(self.args.url, self.args.channel, pkg.subdir, pkg.filename)

    def rattler_upload(self, files: list[str], key: str | None, auth_file: Path | None) -> None:
        rattler_build.upload_package_to_artifactory(files, self.args.url, self.args.channel, token=key, auth_file=auth_file)
