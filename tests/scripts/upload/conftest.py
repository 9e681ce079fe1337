"""Fixtures of the upload tests: small real packages named as recipe/ names them (tests/damaged_archives.py),
a local channel, and a fake server whose py-rattler-build functions are bound to the real signatures."""

from __future__ import annotations

import inspect
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from unittest import mock

import pytest
import rattler_build
from ssm_conda import cli
from ssm_conda.channels import sha256_of
from ssm_conda.upload import targets

from tests.damaged_archives import good_package

# (cuda, python, torch, GPU generation) of the fake packages, named exactly as the recipes name them
VARIANTS = [("13.0", "3.10", "2.13", "all"), ("12.9", "3.10", "2.13", "all"), ("13.0", "3.10", "2.12", "sm90")]
CREDENTIAL_ENV = ("PREFIX_API_KEY", "ANACONDA_API_KEY", "QUETZ_API_KEY", "ARTIFACTORY_TOKEN", "RATTLER_AUTH_FILE",
                  "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
                  "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
                  "ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN")
UPLOAD_FUNCTIONS = ("upload_package_to_prefix", "upload_package_to_anaconda", "upload_package_to_artifactory",
                    "upload_package_to_quetz")


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> list[Path]:
    """One small real package of ours per variant of VARIANTS (tests/damaged_archives.py)."""
    root = tmp_path_factory.mktemp("fakes")
    return [good_package(root, *v) for v in VARIANTS]


@pytest.fixture
def channel(built, tmp_path) -> Path:
    out = tmp_path / "output"
    (out / "noarch").mkdir(parents=True)
    (out / "linux-64").mkdir()
    for pkg in built:
        shutil.copy2(pkg, out / "linux-64" / pkg.name)
    return out


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path_factory) -> None:
    """No credential of this machine's user: not from the environment, nor from ~/.rattler."""
    for name in CREDENTIAL_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # boto3 would ask for an instance role


class FakeServer:
    """Stands in for the channel reads, the credential checks and py-rattler-build's upload functions.

    The functions are autospecs of the real ones: a call that does not bind to the real signature
    raises TypeError. `calls` holds (function, bound arguments) of real uploads; a call without
    files is rattler-build being asked whether its auth storage has a credential (`probes`),
    answered by `stored`. `present` is what the channel serves before: files, or filename -> sha256.
    """

    def __init__(self, monkeypatch, present: Iterable[Path] | dict[str, str] = (),
                 fail_upload: Callable[[str], bool] | None = None, stored: bool = False,
                 error: str = "Server responded with error: 500 Internal Server Error", lists_uploads: bool = True):
        served = present if isinstance(present, dict) else {p.name: sha256_of(p) for p in present}
        self.listed: dict[str, dict] = {name: {"sha256": sha256} for name, sha256 in served.items()}
        self.calls: list[tuple[str, dict]] = []
        self.probes: list[tuple[str, dict]] = []
        self.urls: list[tuple[str, dict]] = []
        self.fail_upload = fail_upload
        self.stored = stored
        self.error = error
        self.lists_uploads = lists_uploads
        monkeypatch.setattr(targets, "http_get_json", self.get)
        monkeypatch.setattr(targets, "listed_in", self.listed_in)
        for fn in UPLOAD_FUNCTIONS:
            real = getattr(rattler_build, fn)
            monkeypatch.setattr(rattler_build, fn, mock.create_autospec(real, side_effect=self._recorder(fn, real)))

    def get(self, url, headers=None, what="server"):
        self.urls.append((url, dict(headers or {})))
        return []

    def listed_in(self, channel_url, subdir, headers):
        self.urls.append((targets.join(channel_url, subdir, "repodata.json"), dict(headers)))
        return {name: record["sha256"] for name, record in self.listed.items()}

    def _recorder(self, fn: str, real: Callable) -> Callable:
        def record(*args, **kwargs):
            call = inspect.signature(real).bind(*args, **kwargs).arguments
            (self.calls if call["package_files"] else self.probes).append((fn, call))
            key = call.get("api_key", call.get("token"))
            if key is None and not self.stored:
                raise rattler_build.RattlerBuildError("No api key was given and none was found in the keychain / auth file")
            if not call["package_files"]:
                return
            if self.fail_upload and self.fail_upload(Path(call["package_files"][0]).name):
                raise rattler_build.UploadError(self.error)
            for f in call["package_files"] if self.lists_uploads else ():
                self.listed[Path(f).name] = {"sha256": sha256_of(Path(f))}
        return record


@pytest.fixture
def fake_server(monkeypatch) -> Callable[..., FakeServer]:
    return lambda **kwargs: FakeServer(monkeypatch, **kwargs)


@pytest.fixture
def upload_cli(monkeypatch) -> Callable[..., int]:
    """`ssm-conda upload ARGS` with these credentials in the environment; returns the exit status."""

    def run(args: list[str], env: dict[str, str] | None = None) -> int:
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        return cli.main(["upload", *args])

    return run
