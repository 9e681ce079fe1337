"""Upload destinations served over HTTP, one small class per server, uploading through py-rattler-build:
where packages go, where the repodata is read, which key it takes, how to log in (S3: s3.py).
"""

from __future__ import annotations

import argparse
import re
from urllib.parse import quote, urlparse

import rattler_build

from ssm_conda.channels import rattler_client
from ssm_conda.console import PipelineError, UsageError
from ssm_conda.upload.archives import LocalPackage
from ssm_conda.upload.credentials import AUTH_STORAGE, Credential, mask, register_secret
from ssm_conda.upload.served import NotFound, http_get_json, listed_in

AUTH_FAILURE_RE = re.compile(r"\b40[13]\b|unauthori[sz]ed|forbidden|api key|token|credential|keychain", re.I)
TRUSTED_PUBLISHING = "trusted publishing (GitHub Actions OIDC)"
NOT_AUTH_RE = re.compile(r"cannot reach|connect|resolve|dns|timed? ?out|unreachable|sending request|\b5\d\d\b", re.I)


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])


def http_url(value: str) -> str:
    """The type of --url and the like: http(s) with a host (and a valid port); a password in it is never shown."""
    try:
        parsed = urlparse(value)
        valid = parsed.scheme in ("http", "https") and bool(parsed.hostname) and parsed.port != 0
    except ValueError:  # a bad port or IPv6 address
        valid = False
    if not valid:
        raise argparse.ArgumentTypeError(f"{mask(value)!r} is not an http(s) URL with a host, e.g. https://quetz.example.org")
    register_secret(parsed.password)
    return value


class Target:
    """One upload destination."""

    name = ""
    label = ""
    help = ""
    env_var = ""
    login_flag = "--token"  # of `rattler-build auth login`: the kind of credential the server takes

    def __init__(self, args: argparse.Namespace, env: dict[str, str]):
        self.args = args
        self.env = env
        self.credential: Credential | None = None

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser) -> None:
        raise NotImplementedError

    # ---- where
    def host(self) -> str:
        """What rattler's auth storage knows the server by."""
        return urlparse(self.args.url).hostname or self.args.url

    def channel_url(self) -> str:
        """Where the channel is served: SUBDIR/repodata.json and SUBDIR/FILENAME below it."""
        raise NotImplementedError

    def channel_display(self) -> str:
        return mask(self.channel_url())

    def destination(self, pkg: LocalPackage) -> str:
        return mask(join(self.channel_url(), pkg.subdir, pkg.filename))

    def repodata_url(self, subdir: str) -> str:
        return mask(join(self.channel_url(), subdir, "repodata.json"))

    # ---- credentials
    def find_credential(self) -> Credential | None:
        rattler_client()
        value = self.env.get(self.env_var)
        if value:
            return Credential(f"${self.env_var}", token=register_secret(value))
        return Credential(AUTH_STORAGE) if self.rattler_finds_credential() else None

    def rattler_finds_credential(self) -> bool:
        """Whether rattler-build's auth storage has a credential here (given no files, its upload sends nothing)."""
        try:
            self.rattler_upload([], None)
        except rattler_build.RattlerBuildError:
            return False
        return True

    def login_command(self) -> str:
        return f"`rattler-build auth login {self.host()} {self.login_flag} TOKEN` (or `pixi auth login` likewise)"

    def missing_credential_hint(self) -> str:
        return f"no credentials for {self.label}: set {self.env_var}, or log in with {self.login_command()}"

    def explain_refusal(self, message: str, unclear_may_be_auth: bool = True) -> str:
        """An error of the upload or of the credential check, with what to do about credentials. rattler-build's
        Quetz and Artifactory errors do not say the status ("Server responded with error"): with a stored
        credential the hint is given unless the error is clearly another."""
        credential = self.credential
        if credential and credential.token:
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
    def token(self) -> str | None:
        return self.credential.token if self.credential else None

    def read_headers(self) -> dict[str, str]:
        """Our reads carry the key from the environment; rattler's client adds what its auth storage holds."""
        return {"Authorization": f"Bearer {self.token()}"} if self.token() else {}

    def served(self, subdir: str) -> dict[str, str]:
        """filename -> sha256 of what the channel's repodata lists for `subdir` ({} if none yet)."""
        return listed_in(self.channel_url(), subdir, self.read_headers())

    # ---- sending
    def rattler_upload(self, files: list[str], key: str | None) -> None:
        """The py-rattler-build call. Without a key it looks the credential up in its auth storage."""
        raise NotImplementedError

    def upload(self, pkg: LocalPackage) -> None:
        self.rattler_upload([str(pkg.path)], self.token())

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
        parser.add_argument("--url", type=http_url, default="https://prefix.dev", help="server URL (self-hosted instances)")
        parser.add_argument("--generate-attestation", action="store_true",
                            help="sign a sigstore attestation of each package (GitHub Actions, id-token: write)")

    def channel_url(self) -> str:
        return join(self.args.url, self.args.channel)

    def find_credential(self) -> Credential | None:
        rattler_client()  # rattler-build and our reads use it with trusted publishing too
        oidc = self.env.get("ACTIONS_ID_TOKEN_REQUEST_URL") and self.env.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
        if self.args.generate_attestation and not oidc:
            raise UsageError("--generate-attestation signs with the workflow's identity: run it in GitHub Actions "
                             "with `permissions: id-token: write`")
        if oidc and not self.env.get(self.env_var):
            register_secret(oidc)
            return Credential(TRUSTED_PUBLISHING)  # rattler-build does the exchange
        return super().find_credential()

    def missing_credential_hint(self) -> str:
        trusted = ", or run in GitHub Actions with `permissions: id-token: write` (trusted publishing)"
        return super().missing_credential_hint() + trusted

    def rattler_upload(self, files: list[str], key: str | None) -> None:
        rattler_build.upload_package_to_prefix(files, self.args.url, self.args.channel, api_key=key,
                                               skip_existing=self.args.skip_existing,
                                               generate_attestation=self.args.generate_attestation)


class AnacondaTarget(Target):
    name = "anaconda"
    help = "anaconda.org"
    label = "anaconda.org"
    env_var = "ANACONDA_API_KEY"
    login_flag = "--conda-token"

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--owner", required=True, help="user or organisation on anaconda.org")
        parser.add_argument("--label", default="main", help="channel label (default: main)")
        parser.add_argument("--url", type=http_url, default="https://api.anaconda.org", help="API URL")
        parser.add_argument("--channel-url", type=http_url, default="https://conda.anaconda.org",
                            help="where channels are served from")

    def channel_url(self) -> str:
        base = join(self.args.channel_url, self.args.owner)
        return base if self.args.label == "main" else join(base, "label", self.args.label)

    def read_headers(self) -> dict[str, str]:
        return {}  # channels are read anonymously (a private one would need /t/TOKEN/ in the URL)

    def rattler_upload(self, files: list[str], key: str | None) -> None:
        rattler_build.upload_package_to_anaconda(files, self.args.owner, channel=[self.args.label], api_key=key,
                                                 url=self.args.url, force=False)


class QuetzTarget(Target):
    name = "quetz"
    help = "a Quetz server"
    label = "quetz"
    env_var = "QUETZ_API_KEY"
    login_flag = "--conda-token"

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--url", type=http_url, required=True, help="server URL, e.g. https://quetz.example.org")
        parser.add_argument("--channel", required=True, help="channel name on the server")

    def channel_url(self) -> str:
        return join(self.args.url, "get", self.args.channel)

    def read_headers(self) -> dict[str, str]:
        return {"X-API-Key": self.token()} if self.token() else {}

    def check_credential(self) -> None:
        if not self.read_headers():
            return  # a key only rattler-build can see: it is checked by the upload itself
        # /api/api-keys answers 401 to an unknown key (/api/me wants a browser session).
        if not isinstance(http_get_json(join(self.args.url, "api/api-keys"), self.read_headers(), self.label), list):
            raise PipelineError(f"quetz at {mask(self.args.url)} did not accept the API key")
        try:
            http_get_json(join(self.args.url, "api/channels", quote(self.args.channel)), self.read_headers(), self.label)
        except NotFound as exc:
            message = f"quetz channel {self.args.channel!r} does not exist at {mask(self.args.url)} (create it first)"
            raise PipelineError(message) from exc

    def rattler_upload(self, files: list[str], key: str | None) -> None:
        rattler_build.upload_package_to_quetz(files, self.args.url, self.args.channel, api_key=key)


class ArtifactoryTarget(Target):
    name = "artifactory"
    help = "a JFrog Artifactory conda repository"
    label = "artifactory"
    env_var = "ARTIFACTORY_TOKEN"

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--url", type=http_url, required=True, help="server URL, e.g. https://example.jfrog.io/artifactory")
        parser.add_argument("--channel", required=True, help="repository key")
        parser.add_argument("--channel-url", type=http_url, help="where the channel is served (default: URL/api/conda/CHANNEL)")

    def channel_url(self) -> str:
        return self.args.channel_url or join(self.args.url, "api/conda", self.args.channel)

    def destination(self, pkg: LocalPackage) -> str:
        return join(self.args.url, self.args.channel, pkg.subdir, pkg.filename)

    def rattler_upload(self, files: list[str], key: str | None) -> None:
        rattler_build.upload_package_to_artifactory(files, self.args.url, self.args.channel, token=key)
