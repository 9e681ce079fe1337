"""upload's options, resolved once: the command line and the environment become one frozen UploadOptions holding a
frozen target; nothing below the command module reads argparse's Namespace or the environment."""

from __future__ import annotations

import dataclasses
import re

import pytest
from ssm_conda import cli
from ssm_conda.selection import Selection
from ssm_conda.upload import command
from ssm_conda.upload.targets import AnacondaTarget, PrefixTarget, QuetzTarget, S3Target

from tests.repo import REPO_ROOT


def resolve(args: list[str], env: dict[str, str] | None = None) -> command.UploadOptions:
    return command.resolve(cli.parse_args(["upload", *args]), env or {})


def test_the_command_line_and_the_environment_become_one_frozen_object(tmp_path):
    chosen = resolve(["--no-verify", "quetz", "--to", "c", "--url", "https://q.example", "--output-dir", str(tmp_path),
                      "--cuda", "13.0", "--package", "mamba-ssm", "--skip-existing"], {"QUETZ_API_KEY": "qz-key-1"})
    assert chosen == command.UploadOptions(
        QuetzTarget(to="c", url="https://q.example", key="qz-key-1"), tmp_path.resolve(), None,
        Selection(cuda="13.0", packages=("mamba-ssm",)), dry_run=False, skip_existing=True, verify_timeout=None, verbose=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        chosen.target.to = "other"  # type: ignore[misc]
    defaults = resolve(["prefix", "--to", "c"])
    assert defaults.verify_timeout == 180.0 and defaults.output_dir == REPO_ROOT / "output"
    assert defaults.target == PrefixTarget(to="c", url="https://prefix.dev")


def test_environment_variables_are_read_only_by_resolve():
    oidc = {"ACTIONS_ID_TOKEN_REQUEST_URL": "https://token.example/x", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc-t"}
    prefix = resolve(["prefix", "--to", "c"], {**oidc, "PREFIX_API_KEY": "pfx-1"}).target
    assert (prefix.oidc_url, prefix.oidc_token, prefix.key) == ("https://token.example/x", "oidc-t", "pfx-1")
    assert not prefix.trusted  # a key in the environment comes first
    assert resolve(["prefix", "--to", "c"], oidc).target.trusted
    s3 = ["s3", "--to", "s3://bucket/path"]
    assert resolve(s3, {"AWS_DEFAULT_REGION": "eu-west-1"}).target.region == "eu-west-1"
    assert resolve(s3, {"AWS_DEFAULT_REGION": "eu-west-1", "AWS_REGION": "us-east-2"}).target.region == "us-east-2"
    assert resolve([*s3, "--region", "ap-south-1"], {"AWS_REGION": "us-east-2"}).target == S3Target(
        to="s3://bucket/path", region="ap-south-1")


def test_nothing_below_the_command_module_reads_argparse_or_the_environment():
    """command.run hands os.environ to command.resolve; every other module gets typed fields."""
    upload = REPO_ROOT / "scripts" / "ssm_conda" / "upload"
    for path in sorted(upload.glob("*.py")):
        text = path.read_text()
        if path.name != "command.py":
            assert not re.search(r"os\.environ|getenv", text), path.name
            assert "Namespace" not in text and ".args" not in text, path.name


@pytest.mark.parametrize(
    ("args", "channel"),
    [(["--to", "me"], "https://conda.anaconda.org/me"),
     (["--to", "me", "--label", "dev"], "https://conda.anaconda.org/me/label/dev"),
     (["--to", "me", "--label", "dev", "--channel-url", "https://mirror.example/me-dev"], "https://mirror.example/me-dev")],
)
def test_channel_url_is_where_the_channel_is_read_back(args, channel):
    """--channel-url means the same on anaconda and artifactory: the channel's own URL, not a base below which it lies."""
    target = resolve(["anaconda", *args]).target
    assert isinstance(target, AnacondaTarget) and target.channel() == channel
    assert resolve(["artifactory", "--to", "r", "--url", "https://a.example/artifactory"]).target.channel() == (
        "https://a.example/artifactory/api/conda/r")
    given = ["artifactory", "--to", "r", "--url", "https://a.example/artifactory", "--channel-url", "https://a.example/r"]
    assert resolve(given).target.channel() == "https://a.example/r"


def test_variants_dir_is_what_upload_renders_against(upload_cli, fake_server, capsys, channel, tmp_path):
    """--variants-dir means what it means on build: the variant files read, here for what the folder may hold."""
    fake_server()
    only_13 = tmp_path / "variants"
    only_13.mkdir()
    (only_13 / "cuda130.yaml").write_text((REPO_ROOT / "variants" / "cuda130.yaml").read_text())
    args = ["prefix", "--to", "c", "--dry-run", "--output-dir", str(channel)]
    assert upload_cli(args) == 0
    capsys.readouterr()
    assert upload_cli([*args, "--variants-dir", str(only_13)]) == 2  # the CUDA 12.9 package is no build of these files
    assert "cuda129_cp310abi3_torch213_all_h" in capsys.readouterr().err


@pytest.mark.parametrize(("target", "args", "bad"), [
    ("prefix", ["--to", "../../other"], "--to '../../other'"),
    ("prefix", ["--to", "org/chan"], "--to 'org/chan'"),
    ("anaconda", ["--to", "me", "--label", "main/../x"], "--label 'main/../x'"),
    ("quetz", ["--to", "c h", "--url", "https://q.example"], "--to 'c h'"),
    ("artifactory", ["--to", "..", "--url", "https://a.example"], "--to '..'"),
    ("s3", ["--to", "s3://../..", "--region", "r"], "--to for s3 must look like s3://BUCKET/PATH, got 's3://../..'"),
    ("s3", ["--to", "s3://bucket/ch//x", "--region", "r"], "got 's3://bucket/ch//x'"),
])
def test_a_destination_is_one_name_per_part_refused_before_any_archive_or_server(target, args, bad, upload_cli, fake_server,
                                                                                 capsys, channel, monkeypatch):
    """`--to ../../other` would have been joined into the upload's URL (https://prefix.dev/../../other)."""
    server = fake_server()
    monkeypatch.setattr(command, "select_packages", lambda *a: pytest.fail("an archive was read"))
    assert upload_cli([target, *args, "--output-dir", str(channel)], {"PREFIX_API_KEY": "pfx-1"}) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --") and bad in err and len(err.splitlines()) == 1, err
    assert server.calls == [] and server.probes == [] and server.urls == []


@pytest.mark.parametrize(("target", "args"), [
    ("prefix", ["--to", "my-channel_2.0"]), ("anaconda", ["--to", "Org", "--label", "dev.1"]),
    ("s3", ["--to", "s3://my.bucket-1/conda/channel/", "--region", "r"]), ("s3", ["--to", "s3://bucket", "--region", "r"]),
])
def test_ordinary_destinations_pass(target, args):
    assert resolve([target, *args]).target.to == args[1]
