"""scripts/upload.py without servers: selection, precheck, credentials, masking, and the requests
built for prefix.dev, anaconda.org and Artifactory (mocked at the rattler_build function boundary)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import rattler_build
from ssm_conda import upload

VARIANTS = [("130", "312", "213"), ("129", "312", "213"), ("130", "311", "212")]


def build_fake(recipe_root: Path, out: Path, cuda: str, py: str, torch: str) -> Path:
    """A tiny real package named like ours, with the recipe's build-string scheme."""
    from rattler_build import Stage0Recipe, ToolConfiguration, VariantConfig

    empty = recipe_root / "empty" / "noarch"
    empty.mkdir(parents=True, exist_ok=True)
    (empty / "repodata.json").write_text('{"info": {"subdir": "noarch"}, "packages": {}, "packages.conda": {}}')
    recipe = f"""
package:
  name: causal-conv1d
  version: "1.7.0"
build:
  number: 0
  noarch: generic
  string: cuda{cuda}_py{py}_torch{torch}_h${{{{ hash }}}}_0
  script:
    - mkdir -p $PREFIX/share/fake && echo {cuda}{py}{torch} > $PREFIX/share/fake/id.txt
"""
    stage0 = Stage0Recipe.from_yaml(recipe, recipe_dir=recipe_root / f"r{cuda}{py}{torch}")
    result = stage0.run_build(VariantConfig(), ToolConfiguration(), output_dir=out,
                              channels=[empty.parent.as_uri()], no_build_id=True)
    return Path(result[0].packages[0])


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("fakes")
    return [build_fake(root, root / "out", *v) for v in VARIANTS]


@pytest.fixture
def channel(built, tmp_path) -> Path:
    out = tmp_path / "output"
    (out / "noarch").mkdir(parents=True)
    (out / "linux-64").mkdir()
    for pkg in built:
        shutil.copy2(pkg, out / "noarch" / pkg.name)
    return out


class FakeServer:
    """Stands in for http_get_json and the rattler_build upload functions."""

    def __init__(self, monkeypatch, present=(), fail_upload=None):
        self.listed: dict[str, dict] = {name: {"sha256": ""} for name in present}
        self.calls: list[tuple[str, tuple, dict]] = []
        self.urls: list[tuple[str, dict]] = []
        self.fail_upload = fail_upload
        monkeypatch.setattr(upload, "http_get_json", self.get)
        for fn in ("upload_package_to_prefix", "upload_package_to_anaconda", "upload_package_to_artifactory",
                   "upload_package_to_quetz"):
            monkeypatch.setattr(rattler_build, fn, self._recorder(fn))

    def get(self, url, headers=None, what="server"):
        self.urls.append((url, dict(headers or {})))
        if url.endswith("repodata.json"):
            return {"packages": {}, "packages.conda": dict(self.listed)}
        return []

    def _recorder(self, fn):
        def record(files, *args, **kwargs):
            self.calls.append((fn, (files, *args), kwargs))
            if self.fail_upload and self.fail_upload(Path(files[0]).name):
                raise rattler_build.UploadError("Server responded with error: 500 Internal Server Error")
            for f in files:
                self.listed[Path(f).name] = {"sha256": upload.sha256_of(Path(f))}
        return record


def run(monkeypatch, args: list[str], env: dict[str, str] | None = None) -> int:
    for name in ("PREFIX_API_KEY", "ANACONDA_API_KEY", "QUETZ_API_KEY", "ARTIFACTORY_TOKEN", "RATTLER_AUTH_FILE",
                 "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                 "ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    return upload.run_cli(upload.main, args)


# ------------------------------------------------------------------------------- command line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ftp"], "unknown target 'ftp'; accepted: prefix, anaconda, quetz, artifactory, s3"),
        ([], "name a target; accepted: prefix, anaconda, quetz, artifactory, s3"),
        (["prefix"], "the following arguments are required: --channel"),
        (["quetz", "--url", "http://x", "--channel", "c", "--api-key", "k"], "--api-key is not accepted"),
        (["prefix", "--channel", "c", "--cuda", "11.8"], "unknown CUDA version '11.8'; accepted: 12.9, 13.0"),
        (["prefix", "--channel", "c", "--python", "three"], "unknown Python version 'three'"),
        (["s3", "--channel", "https://bucket/x", "--region", "r"], "--channel for s3 must look like s3://"),
        (["s3", "--channel", "s3://bucket/x"], "s3 needs --region"),
    ],
)
def test_usage_errors_are_one_line(monkeypatch, capsys, channel, args, message):
    assert run(monkeypatch, [*args, "--output-dir", str(channel)] if args else args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err, err


def test_missing_output_dir(monkeypatch, capsys, tmp_path):
    assert run(monkeypatch, ["prefix", "--channel", "c", "--output-dir", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


# ---------------------------------------------------------------------------------- selection


def test_selectors_match_the_build_string(channel):
    packages = upload.find_packages(channel)
    for pkg in packages:
        upload.check_package(pkg, {})

    def names(**kw):
        return sorted(p.build.split("_h")[0] for p in upload.filter_packages(packages, upload.Selection(**kw)))

    assert names() == ["cuda129_py312_torch213", "cuda130_py311_torch212", "cuda130_py312_torch213"]
    assert names(cuda="13.0") == ["cuda130_py311_torch212", "cuda130_py312_torch213"]
    assert names(cuda="13.0", python="3.12") == ["cuda130_py312_torch213"]
    assert names(torch="2.12") == ["cuda130_py311_torch212"]
    assert names(python="3.10") == []


def test_no_match_is_an_error(monkeypatch, capsys, channel):
    FakeServer(monkeypatch)
    assert run(monkeypatch, ["prefix", "--channel", "c", "--python", "3.10", "--output-dir", str(channel)]) == 2
    assert "no package in" in capsys.readouterr().err


# ----------------------------------------------------------------------------------- precheck


def test_precheck_rejects_junk_and_uploads_nothing(monkeypatch, capsys, channel):
    server = FakeServer(monkeypatch)
    (channel / "noarch" / "causal-conv1d-1.7.0-cuda130_py313_torch213_h0_0.conda").write_bytes(b"junk")
    assert run(monkeypatch, ["prefix", "--channel", "c", "--output-dir", str(channel)],
               {"PREFIX_API_KEY": "pfx-secret-123"}) == 1
    captured = capsys.readouterr()
    assert "not a valid .conda archive" in captured.err and "nothing was uploaded" in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert server.calls == [] and server.urls == []
    assert "invalid" in captured.out and "not attempted" in captured.out


def test_precheck_rejects_renamed_and_misplaced_files(channel, built):
    renamed = channel / "noarch" / "causal-conv1d-9.9.9-cuda130_py312_torch213_h0_0.conda"
    shutil.copy2(built[0], renamed)
    pkg = upload.LocalPackage(renamed, "noarch", size=renamed.stat().st_size)
    upload.check_package(pkg, {})
    assert "does not match its index.json" in pkg.problem

    misplaced = channel / "linux-64" / built[0].name
    shutil.copy2(built[0], misplaced)
    pkg = upload.LocalPackage(misplaced, "linux-64", size=misplaced.stat().st_size)
    upload.check_package(pkg, {})
    assert "index.json says subdir noarch" in pkg.problem

    pkg = upload.LocalPackage(channel / "noarch" / built[0].name, "noarch", size=built[0].stat().st_size)
    upload.check_package(pkg, {built[0].name: {"sha256": "0" * 64}})
    assert "sha256 differs" in pkg.problem


def test_truncated_conda_is_invalid(channel, built):
    data = built[0].read_bytes()
    path = channel / "noarch" / built[0].name
    path.write_bytes(data[: len(data) // 2])
    pkg = upload.LocalPackage(path, "noarch", size=path.stat().st_size)
    upload.check_package(pkg, {})
    assert pkg.problem and "archive" in pkg.problem


# -------------------------------------------------------------------------------------- prefix


def test_prefix_upload_request(monkeypatch, capsys, channel):
    server = FakeServer(monkeypatch)
    args = ["prefix", "--channel", "my-chan", "--cuda", "13.0", "--output-dir", str(channel)]
    assert run(monkeypatch, args, {"PREFIX_API_KEY": "pfx-secret-123"}) == 0
    assert [c[0] for c in server.calls] == ["upload_package_to_prefix"] * 2
    fn, positional, kwargs = server.calls[0]
    files, url, chan = positional
    assert url == "https://prefix.dev" and chan == "my-chan" and len(files) == 1
    assert kwargs == {"api_key": "pfx-secret-123", "skip_existing": False}
    assert ("https://prefix.dev/my-chan/noarch/repodata.json",
            {"Authorization": "Bearer pfx-secret-123"}) in server.urls
    out = capsys.readouterr().out
    assert "pfx-secret-123" not in out and "$PREFIX_API_KEY (****)" in out
    assert out.count("uploaded") >= 2 and "done: 2 uploaded, 0 skipped" in out


def test_prefix_trusted_publishing_passes_no_key(monkeypatch, capsys, channel):
    server = FakeServer(monkeypatch)
    env = {"ACTIONS_ID_TOKEN_REQUEST_URL": "https://token.actions.example/x",
           "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc-request-token"}
    assert run(monkeypatch, ["prefix", "--channel", "c", "--torch", "2.12", "--output-dir", str(channel)], env) == 0
    assert server.calls[0][2]["api_key"] is None
    out = capsys.readouterr().out
    assert "trusted publishing" in out and "oidc-request-token" not in out


def test_prefix_without_credentials(monkeypatch, capsys, channel):
    server = FakeServer(monkeypatch)
    assert run(monkeypatch, ["prefix", "--channel", "c", "--output-dir", str(channel)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no credentials for prefix.dev: set PREFIX_API_KEY") and "trusted publishing" in err
    assert server.calls == []


def test_prefix_token_from_auth_file(monkeypatch, capsys, channel, tmp_path):
    server = FakeServer(monkeypatch)
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"*.prefix.dev": {"BearerToken": "from-auth-file-xyz"}}))
    args = ["prefix", "--channel", "c", "--url", "https://repo.prefix.dev", "--cuda", "12.9",
            "--output-dir", str(channel)]
    assert run(monkeypatch, args, {"RATTLER_AUTH_FILE": str(auth)}) == 0
    assert server.calls[0][2]["api_key"] == "from-auth-file-xyz"
    out = capsys.readouterr().out
    assert "from-auth-file-xyz" not in out and "RATTLER_AUTH_FILE[*.prefix.dev]" in out


def test_existing_package_refused_then_skipped(monkeypatch, capsys, channel, built):
    present = [built[0].name]
    server = FakeServer(monkeypatch, present=present)
    env = {"PREFIX_API_KEY": "pfx-secret-123"}
    assert run(monkeypatch, ["prefix", "--channel", "c", "--output-dir", str(channel)], env) == 1
    captured = capsys.readouterr()
    assert "1 package(s) already in" in captured.err and "--skip-existing" in captured.err
    assert server.calls == []
    assert re.search(rf"{re.escape(built[0].name)}\s.*exists", captured.out)

    assert run(monkeypatch, ["prefix", "--channel", "c", "--output-dir", str(channel), "--skip-existing"], env) == 0
    out = capsys.readouterr().out
    assert len(server.calls) == 2 and built[0].name not in {Path(c[1][0][0]).name for c in server.calls}
    assert "done: 2 uploaded, 1 skipped" in out
    assert server.calls[0][2]["skip_existing"] is True


def test_failure_midway_reports_what_went(monkeypatch, capsys, channel, built):
    order = sorted(p.name for p in built)
    server = FakeServer(monkeypatch, fail_upload=lambda name: name == order[1])
    assert run(monkeypatch, ["prefix", "--channel", "c", "--output-dir", str(channel)],
               {"PREFIX_API_KEY": "pfx-secret-123"}) == 1
    captured = capsys.readouterr()
    assert len(server.calls) == 2
    assert re.search(rf"{re.escape(order[0])}\s.*uploaded", captured.out)
    assert re.search(rf"{re.escape(order[1])}\s.*failed\s+Server responded with error: 500", captured.out)
    assert re.search(rf"{re.escape(order[2])}\s.*not attempted", captured.out)
    assert captured.err.strip() == (f"error: {order[1]}: Server responded with error: 500 Internal Server Error "
                                    "(1 of 3 uploaded)")


def test_not_served_within_the_bound(monkeypatch, capsys, channel):
    server = FakeServer(monkeypatch)
    monkeypatch.setattr(server, "get", lambda url, headers=None, what="": {"packages": {}, "packages.conda": {}})
    monkeypatch.setattr(upload, "http_get_json", server.get)
    args = ["prefix", "--channel", "c", "--cuda", "12.9", "--verify-timeout", "0.2", "--output-dir", str(channel)]
    assert run(monkeypatch, args, {"PREFIX_API_KEY": "pfx-secret-123"}) == 1
    captured = capsys.readouterr()
    assert "uploaded but not listed in https://prefix.dev/c/noarch/repodata.json after 0s" in captured.err
    assert "not served" in captured.out


def test_secret_in_an_upload_error_is_masked(monkeypatch, capsys, channel):
    server = FakeServer(monkeypatch)

    def leaky(files, *args, **kwargs):
        raise rattler_build.UploadError(f"401 Unauthorized\nwhile sending token {kwargs['api_key']}")

    monkeypatch.setattr(rattler_build, "upload_package_to_prefix", leaky)
    args = ["prefix", "--channel", "c", "--cuda", "12.9", "--output-dir", str(channel)]
    assert run(monkeypatch, args, {"PREFIX_API_KEY": "pfx-leaky-secret"}) == 1
    captured = capsys.readouterr()
    assert "pfx-leaky-secret" not in captured.out + captured.err
    assert "while sending token ****" in captured.err and len(captured.err.strip().splitlines()) == 1
    assert server.calls == []


# ------------------------------------------------------------------------------------ anaconda


def test_anaconda_upload_request(monkeypatch, capsys, channel):
    server = FakeServer(monkeypatch)
    args = ["anaconda", "--owner", "me", "--label", "dev", "--python", "3.11", "--output-dir", str(channel)]
    assert run(monkeypatch, args, {"ANACONDA_API_KEY": "ana-secret-456"}) == 0
    fn, (files, owner), kwargs = server.calls[0]
    assert fn == "upload_package_to_anaconda" and owner == "me" and len(files) == 1
    assert kwargs == {"channel": ["dev"], "api_key": "ana-secret-456", "url": "https://api.anaconda.org",
                      "force": False}
    urls = [u for u, _ in server.urls]
    assert urls[0] == "https://api.anaconda.org/user"
    assert "https://conda.anaconda.org/me/label/dev/noarch/repodata.json" in urls
    assert "ana-secret-456" not in capsys.readouterr().out


def test_anaconda_dry_run_contacts_nothing(monkeypatch, capsys, channel, built):
    server = FakeServer(monkeypatch)
    assert run(monkeypatch, ["anaconda", "--owner", "me", "--dry-run", "--output-dir", str(channel)]) == 0
    out = capsys.readouterr().out
    assert server.calls == [] and server.urls == []
    assert "dry run: 3 package(s)" in out and "none found" in out
    for pkg in built:
        assert f"https://conda.anaconda.org/me/noarch/{pkg.name}" in out


# --------------------------------------------------------------------------------- artifactory


def test_artifactory_upload_request(monkeypatch, capsys, channel, tmp_path):
    server = FakeServer(monkeypatch)
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"art.example.com": {"BasicHTTP": {"username": "u", "password": "art-pass-789"}}}))
    args = ["artifactory", "--url", "https://art.example.com/artifactory", "--channel", "conda-local",
            "--cuda", "12.9", "--output-dir", str(channel)]
    assert run(monkeypatch, args, {"RATTLER_AUTH_FILE": str(auth)}) == 0
    fn, (files, url, chan), kwargs = server.calls[0]
    assert (fn, url, chan, kwargs) == ("upload_package_to_artifactory", "https://art.example.com/artifactory",
                                       "conda-local", {"token": "art-pass-789"})
    assert ("https://art.example.com/artifactory/api/conda/conda-local/noarch/repodata.json",
            {"Authorization": "Bearer art-pass-789"}) in server.urls
    assert "art-pass-789" not in capsys.readouterr().out


def test_artifactory_wrong_auth_kind(monkeypatch, capsys, channel, tmp_path):
    FakeServer(monkeypatch)
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"art.example.com": {"CondaToken": "nope"}}))
    args = ["artifactory", "--url", "https://art.example.com/artifactory", "--channel", "x",
            "--output-dir", str(channel)]
    assert run(monkeypatch, args, {"RATTLER_AUTH_FILE": str(auth)}) == 1
    assert "no credentials for artifactory: set ARTIFACTORY_TOKEN" in capsys.readouterr().err


def test_broken_auth_file(monkeypatch, capsys, channel, tmp_path):
    auth = tmp_path / "auth.json"
    auth.write_text("{not json")
    args = ["quetz", "--url", "http://127.0.0.1:9", "--channel", "c", "--output-dir", str(channel)]
    assert run(monkeypatch, args, {"RATTLER_AUTH_FILE": str(auth)}) == 1
    assert "is not a readable JSON file" in capsys.readouterr().err


# ------------------------------------------------------------------------------- unreachable


def test_unreachable_server_is_one_line(monkeypatch, capsys, channel):
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = ["quetz", "--url", f"http://127.0.0.1:{port}", "--channel", "c", "--output-dir", str(channel)]
    assert run(monkeypatch, args, {"QUETZ_API_KEY": "qz-secret-000"}) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot reach quetz at http://127.0.0.1:{port}/") and "refused" in err
    assert len(err.strip().splitlines()) == 1 and "qz-secret-000" not in err


def test_s3_unreachable_is_one_line(monkeypatch, capsys, channel):
    pytest.importorskip("boto3")
    args = ["s3", "--channel", "s3://b/ch", "--endpoint-url", "http://127.0.0.1:9", "--region", "us-east-1",
            "--addressing-style", "path", "--output-dir", str(channel)]
    assert run(monkeypatch, args, {"AWS_ACCESS_KEY_ID": "AKIAXX", "AWS_SECRET_ACCESS_KEY": "s3-secret-x"}) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot reach S3 at http://127.0.0.1:9") and len(err.strip().splitlines()) == 1
