"""`ssm-conda upload` against real servers on loopback: Quetz (dev mode) and moto's S3 server,
with the real py-rattler-build (no mocks).

The tests start the servers themselves and stop them afterwards. Quetz lives in a venv of its own (its pins clash
with ours), which the first run makes from quetz-requirements.txt (about a minute; cached outside the clone, made
again when the pins change); where that fails the tests fail saying why, unless SSM_CONDA_ALLOW_SERVER_SKIP=1 says
skipping is fine. Set SSM_CONDA_QUETZ to use another `quetz`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from ssm_conda import cli
from ssm_conda.channels import sha256_of
from ssm_conda.selection import Selection
from ssm_conda.upload.archives import check_all, select_packages
from ssm_conda.upload.command import resolve, wait_until_served

from tests.cached_venv import VenvError, cached_venv
from tests.damaged_archives import DAMAGES, build_package, good_package, parts

pytestmark = pytest.mark.servers

QUETZ_REQUIREMENTS = Path(__file__).with_name("quetz-requirements.txt")
# the packages sent: small real packages of ours (tests/damaged_archives.py), one variant each
PROBE_VARIANTS = [("13.0", "3.10", torch, generation) for torch in ("2.10", "2.11", "2.12")
                  for generation in ("all", "sm8x", "sm90")]
DAMAGED = ["garbage pkg member", "no pkg member", "index lies about subdir", "foreign package"]  # the subset sent to each


def _missing(what: str, why: str) -> None:
    message = f"{what} is not installed: {why}"
    if os.environ.get("SSM_CONDA_ALLOW_SERVER_SKIP") == "1":
        pytest.skip(message)
    pytest.fail(message)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_http(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"server did not answer {url} within {timeout_s}s:\n{log.read_text()[-3000:]}")


def stop(proc: subprocess.Popen) -> None:
    """Stop the server we started: its own process group (quetz forks a job supervisor)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)


def channel_with(tmp: Path, packages: list[Path], name: str) -> Path:
    """A fresh output-like channel dir holding copies of `packages`."""
    channel = tmp / name
    for pkg in packages:
        (channel / pkg.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy2(pkg, channel / pkg.parent.name / pkg.name)
    return channel


def install_from(channel_url: str, prefix: Path, cache: Path, package: Path) -> list[str]:
    """Install exactly this package (its record in the channel's repodata) without its dependencies: they are
    conda-forge's (python, pytorch, the CUDA libraries), which the server does not hold. A noarch: python package
    needs a python in the transaction to know its site-packages: an empty one, 3.12, from a channel of its own."""
    from rattler import PackageName, install
    from ssm_conda.channels import fetch_repodata, index_channel

    local = cache / "python-channel"
    build_package(local / "linux-64", "python", "3.12.0", "0")
    index_channel(local)
    python = fetch_repodata(local.as_uri(), "linux-64").load_records(PackageName("python"))
    records = [r for r in fetch_repodata(channel_url, "linux-64").load_records(PackageName(parts(package)[0]))
               if r.file_name == package.name]
    asyncio.run(install([*python, *records], target_prefix=prefix, cache_dir=cache, show_progress=False))
    return [f"{r.name.normalized}={r.version}" for r in records]


def module_text(prefix: Path, package: Path) -> str:
    """The __init__.py of an installed probe (tests/damaged_archives.py's good_package), in the site-packages of the
    environment's Python (install_from's)."""
    return (prefix / "lib" / "python3.12" / "site-packages" / "causal_conv1d" / "__init__.py").read_text()


def upload(monkeypatch, args: list[str], env: dict[str, str]) -> int:
    """Run the CLI as a user would (errors become one line on stderr and an exit status)."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return cli.main(["upload", *args])


def get_json(url: str, headers: dict[str, str] | None = None) -> dict:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as resp:
        return json.loads(resp.read())


def listed(repodata: dict) -> set[str]:
    return set(repodata.get("packages", {})) | set(repodata.get("packages.conda", {}))


@pytest.fixture(scope="module")
def probes(tmp_path_factory) -> list[Path]:
    tmp = tmp_path_factory.mktemp("probes")
    return [good_package(tmp, *variant, text="probe") for variant in PROBE_VARIANTS]


def changed_build(index: int, tmp: Path) -> Path:
    """A channel holding probe `index` built again with another payload: the same file name (a recipe change
    keeps it), another sha256."""
    good_package(tmp / "changed", *PROBE_VARIANTS[index], text="changed")
    return tmp / "changed"


def read_back(monkeypatch, args: list[str], env: dict[str, str], sha256: str | None = None) -> dict[str, str]:
    """What the upload's read-back says of the local channel's packages (filename -> problem), with
    each package's sha256 replaced by `sha256` where given."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    options = resolve(cli.parse_args(["upload", *args]), os.environ)
    target = options.target
    local = select_packages(options.output_dir, Selection())
    assert check_all(local, options.output_dir) == []
    for pkg in local:
        pkg.sha256 = sha256 or pkg.sha256
    return wait_until_served(target, local, 1.0, verbose=False)


# ------------------------------------------------------------------------------------- Quetz


@pytest.fixture(scope="module")
def quetz(tmp_path_factory):
    try:
        named = os.environ.get("SSM_CONDA_QUETZ")
        exe = Path(named) if named else cached_venv("quetz-venv", ["-r", str(QUETZ_REQUIREMENTS)]) / "bin" / "quetz"
    except VenvError as exc:
        _missing(f"quetz-server ({QUETZ_REQUIREMENTS.name})", str(exc))
    if not exe.exists():
        _missing("quetz-server", f"SSM_CONDA_QUETZ={exe}: no such file")
    work = tmp_path_factory.mktemp("quetz")
    conf = work / "config.toml"
    conf.write_text(
        '[sqlalchemy]\ndatabase_url = "sqlite:///./quetz.sqlite"\n\n'
        f'[session]\nsecret = "{os.urandom(16).hex()}"\nhttps_only = false\n\n'
        # dev mode makes users alice..dave and one API key for one of them: make all of them owners.
        '[users]\nadmins = ["dummy:alice", "dummy:bob", "dummy:carol", "dummy:dave"]\n'
    )
    port = free_port()
    log = work / "quetz.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(exe), "run", str(work / "deployment"), "--copy-conf", str(conf), "--dev", "--delete",
             "--host", "127.0.0.1", "--port", str(port)],
            cwd=work, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{url}/api/channels", proc, log)
        key = re.search(r"Test API key created for user \"\w+\": (\w+)", log.read_text()).group(1)
        request = urllib.request.Request(
            f"{url}/api/channels", method="POST",
            data=json.dumps({"name": "cc1d", "private": False}).encode(),
            headers={"X-API-Key": key, "Content-Type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=10).close()
        yield {"url": url, "key": key, "channel": "cc1d", "log": log}
    finally:
        stop(proc)


def quetz_args(quetz, channel_dir: Path, *extra: str) -> list[str]:
    return ["quetz", "--url", quetz["url"], "--to", quetz["channel"], "--output-dir", str(channel_dir),
            "--verify-timeout", "60", *extra]


def quetz_repodata(quetz, subdir: str = "linux-64") -> set[str]:
    try:
        return listed(get_json(f"{quetz['url']}/get/{quetz['channel']}/{subdir}/repodata.json"))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return set()
        raise


def test_quetz_round_trip(quetz, probes, tmp_path, capsys, monkeypatch):
    pkg = probes[0]
    channel = channel_with(tmp_path, [pkg], "out")
    env = {"QUETZ_API_KEY": quetz["key"]}

    assert upload(monkeypatch, quetz_args(quetz, channel), env) == 0
    out = capsys.readouterr().out
    assert re.search(rf"{re.escape(pkg.name)}\s.*uploaded", out), out
    assert quetz["key"] not in out
    assert pkg.name in quetz_repodata(quetz)
    # the read-back holds the served sha256 to the local file's
    assert read_back(monkeypatch, quetz_args(quetz, channel), env) == {}
    assert read_back(monkeypatch, quetz_args(quetz, channel), env, "0" * 64) == {pkg.name: "served with a different sha256"}

    prefix = tmp_path / "prefix"
    installed = install_from(f"{quetz['url']}/get/{quetz['channel']}", prefix, tmp_path / "cache", pkg)
    assert installed == ["causal-conv1d=1.7.0"]
    assert module_text(prefix, pkg) == f"# {parts(pkg)[2]} probe\n"

    # a second upload is refused without --skip-existing ...
    before = get_json(f"{quetz['url']}/get/{quetz['channel']}/linux-64/repodata.json")
    assert upload(monkeypatch, quetz_args(quetz, channel), env) == 1
    captured = capsys.readouterr()
    assert "already in" in captured.err and "--skip-existing" in captured.err
    assert re.search(rf"{re.escape(pkg.name)}\s.*exists", captured.out)

    # ... and is a no-op with it
    assert upload(monkeypatch, quetz_args(quetz, channel, "--skip-existing"), env) == 0
    out = capsys.readouterr().out
    assert re.search(rf"{re.escape(pkg.name)}\s.*skipped", out) and "0 uploaded, 1 skipped" in out

    # ... but another build under the same name fails it, naming the fix, and the served one stays
    changed = changed_build(0, tmp_path)
    assert upload(monkeypatch, quetz_args(quetz, changed, "--skip-existing"), env) == 1
    err = capsys.readouterr().err
    assert f"error: {pkg.name} is already in {quetz['url']}/get/{quetz['channel']} with another sha256" in err
    assert "bump build.number in recipe/causal-conv1d/recipe.yaml" in err and len(err.strip().splitlines()) == 1
    after = get_json(f"{quetz['url']}/get/{quetz['channel']}/linux-64/repodata.json")
    assert listed(after) == listed(before)
    assert after["packages.conda"][pkg.name]["sha256"] == before["packages.conda"][pkg.name]["sha256"] == sha256_of(pkg)


def test_quetz_wrong_key_uploads_nothing(quetz, probes, tmp_path, capsys, monkeypatch):
    pkg = probes[1]
    channel = channel_with(tmp_path, [pkg], "out")
    wrong = "0123456789abcdef0123456789abcdef"
    assert upload(monkeypatch, quetz_args(quetz, channel), {"QUETZ_API_KEY": wrong}) == 1
    captured = capsys.readouterr()
    assert "rejected the credentials" in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert wrong not in captured.out + captured.err
    assert pkg.name not in quetz_repodata(quetz)


@pytest.mark.parametrize("damage", DAMAGED)
def test_quetz_damaged_archive_stops_everything(damage, quetz, probes, tmp_path, capsys, monkeypatch):
    """A good package and a damaged one (tests/damaged_archives.py): one line, and neither is sent."""
    good, victim = probes[2], probes[3]
    channel = channel_with(tmp_path, [good, victim], "out")
    DAMAGES[damage](channel / "linux-64" / victim.name)
    status = upload(monkeypatch, quetz_args(quetz, channel), {"QUETZ_API_KEY": quetz["key"]})
    err = capsys.readouterr().err
    assert status == (2 if damage == "foreign package" else 1) and len(err.strip().splitlines()) == 1, err
    assert not {good.name, victim.name, "numpy-2.0.0-py312_0.conda"} & quetz_repodata(quetz)


def test_quetz_missing_channel_is_one_line(quetz, probes, tmp_path, capsys, monkeypatch):
    channel = channel_with(tmp_path, [probes[4]], "out")
    args = ["quetz", "--url", quetz["url"], "--to", "nope", "--output-dir", str(channel)]
    assert upload(monkeypatch, args, {"QUETZ_API_KEY": quetz["key"]}) == 1
    err = capsys.readouterr().err
    assert err.strip() == f"error: quetz channel 'nope' does not exist at {quetz['url']} (create it first)"


def test_quetz_user_logged_in_with_rattler_build(quetz, probes, tmp_path, capsys, monkeypatch):
    """No key in the environment: rattler-build finds the one `rattler-build auth login` stored
    (~/.rattler/credentials.json when there is no keyring; HOME is a temporary directory here)."""
    pkg = probes[5]
    credentials = Path.home() / ".rattler" / "credentials.json"
    credentials.parent.mkdir(parents=True, exist_ok=True)
    credentials.write_text(json.dumps({"127.0.0.1": {"CondaToken": quetz["key"]}}))
    assert upload(monkeypatch, quetz_args(quetz, channel_with(tmp_path, [pkg], "out")), {}) == 0
    out = capsys.readouterr().out
    assert "with rattler's auth storage" in out and quetz["key"] not in out
    assert pkg.name in quetz_repodata(quetz)


def test_quetz_key_from_the_auth_file(quetz, probes, tmp_path, capsys, monkeypatch):
    pkg = probes[6]
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"*.example.org": {"CondaToken": "not-this-one"}, "127.0.0.1": {"CondaToken": quetz["key"]}}))
    channel = channel_with(tmp_path, [pkg], "out")
    assert upload(monkeypatch, quetz_args(quetz, channel), {"RATTLER_AUTH_FILE": str(auth)}) == 0
    out = capsys.readouterr().out
    assert "with rattler's auth storage" in out and quetz["key"] not in out
    assert pkg.name in quetz_repodata(quetz)


def test_quetz_refused_stored_key_says_how_to_log_in(quetz, probes, tmp_path, capsys, monkeypatch):
    pkg = probes[7]
    wrong = "fedcba9876543210fedcba9876543210"
    credentials = Path.home() / ".rattler" / "credentials.json"
    credentials.parent.mkdir(parents=True, exist_ok=True)
    credentials.write_text(json.dumps({"127.0.0.1": {"CondaToken": wrong}}))
    assert upload(monkeypatch, quetz_args(quetz, channel_with(tmp_path, [pkg], "out")), {}) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "log in with `rattler-build auth login 127.0.0.1 --conda-token TOKEN`" in err, err
    assert pkg.name not in quetz_repodata(quetz)


# ---------------------------------------------------------------------------------------- S3


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    exe = Path(sys.executable).parent / "moto_server"
    if not exe.exists():
        _missing("moto's server", f"install it with {sys.executable} -m pip install 'moto[server]' boto3")
    work = tmp_path_factory.mktemp("moto")
    port = free_port()
    log = work / "moto.log"
    with log.open("w") as out:
        proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port)], cwd=work, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{url}/", proc, log)
        import boto3

        s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
        s3.create_bucket(Bucket="cc1d-bucket")
        # anonymous reads, as a public channel bucket has them: conda clients fetch over plain HTTP
        s3.put_bucket_policy(Bucket="cc1d-bucket", Policy=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                           "Resource": "arn:aws:s3:::cc1d-bucket/*"}],
        }))
        yield {"url": url, "bucket": "cc1d-bucket", "client": s3}
    finally:
        stop(proc)


S3_ENV = {"AWS_ACCESS_KEY_ID": "AKIAMOTOTESTING", "AWS_SECRET_ACCESS_KEY": "moto-secret-not-real"}


def s3_args(moto, channel_dir: Path, *extra: str) -> list[str]:
    return ["s3", "--to", f"s3://{moto['bucket']}/channel", "--endpoint-url", moto["url"],
            "--region", "us-east-1", "--addressing-style", "path", "--output-dir", str(channel_dir),
            "--verify-timeout", "30", *extra]


def test_s3_round_trip(moto, probes, tmp_path, capsys, monkeypatch):
    pkg = probes[0]
    channel = channel_with(tmp_path, [pkg], "out")

    assert upload(monkeypatch, s3_args(moto, channel), S3_ENV) == 0
    out = capsys.readouterr().out
    assert re.search(rf"{re.escape(pkg.name)}\s.*uploaded", out), out
    assert S3_ENV["AWS_SECRET_ACCESS_KEY"] not in out

    # indexed: the bucket's repodata lists it (served over plain HTTP, path style)
    http_channel = f"{moto['url']}/{moto['bucket']}/channel"
    assert pkg.name in listed(get_json(f"{http_channel}/linux-64/repodata.json"))
    assert read_back(monkeypatch, s3_args(moto, channel), S3_ENV) == {}
    assert read_back(monkeypatch, s3_args(moto, channel), S3_ENV, "f" * 64) == {pkg.name: "served with a different sha256"}
    prefix = tmp_path / "prefix"
    assert install_from(http_channel, prefix, tmp_path / "cache", pkg) == ["causal-conv1d=1.7.0"]
    assert module_text(prefix, pkg) == f"# {parts(pkg)[2]} probe\n"

    # re-runs: refused without --skip-existing, a no-op with it, a failure for another build of the name
    assert upload(monkeypatch, s3_args(moto, channel), S3_ENV) == 1
    assert "already in" in capsys.readouterr().err
    assert upload(monkeypatch, s3_args(moto, channel, "--skip-existing"), S3_ENV) == 0
    assert "0 uploaded, 1 skipped" in capsys.readouterr().out
    changed = changed_build(0, tmp_path)
    assert upload(monkeypatch, s3_args(moto, changed, "--skip-existing"), S3_ENV) == 1
    err = capsys.readouterr().err
    assert f"error: {pkg.name} is already in s3://{moto['bucket']}/channel (endpoint {moto['url']}) with another sha256" in err
    assert "bump build.number in recipe/causal-conv1d/recipe.yaml" in err
    served = get_json(f"{http_channel}/linux-64/repodata.json")["packages.conda"][pkg.name]["sha256"]
    assert served == sha256_of(pkg)
    body = moto["client"].get_object(Bucket=moto["bucket"], Key=f"channel/linux-64/{pkg.name}")["Body"].read()
    assert body == pkg.read_bytes()


@pytest.mark.parametrize("damage", DAMAGED)
def test_s3_damaged_archive_stops_everything(damage, moto, probes, tmp_path, capsys, monkeypatch):
    good, victim = probes[2], probes[3]
    channel = channel_with(tmp_path, [good, victim], "out")
    DAMAGES[damage](channel / "linux-64" / victim.name)
    status = upload(monkeypatch, s3_args(moto, channel), S3_ENV)
    err = capsys.readouterr().err
    assert status == (2 if damage == "foreign package" else 1) and len(err.strip().splitlines()) == 1, err
    keys = moto["client"].list_objects_v2(Bucket=moto["bucket"], Prefix="channel/").get("Contents", [])
    assert not {good.name, victim.name, "numpy-2.0.0-py312_0.conda"} & {Path(k["Key"]).name for k in keys}


def test_s3_missing_bucket_is_one_line(moto, probes, tmp_path, capsys, monkeypatch):
    channel = channel_with(tmp_path, [probes[1]], "out")
    args = s3_args(moto, channel)
    args[args.index("--to") + 1] = "s3://no-such-bucket/channel"
    assert upload(monkeypatch, args, S3_ENV) == 1
    err = capsys.readouterr().err
    assert err.strip() == f"error: S3 bucket 'no-such-bucket' does not exist at {moto['url']}"
