"""`ssm-conda upload`'s command line and run, against the fake server (no network)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ssm_conda import cli
from ssm_conda.channels import sha256_of

from tests.damaged_archives import good_package

ACCEPTED = "accepted: prefix, anaconda, quetz, artifactory, s3"
QUETZ = ["quetz", "--url", "http://q.example", "--to", "c"]
ENV = {"PREFIX_API_KEY": "pfx-secret-123"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ftp"], "invalid choice: 'ftp' (choose from 'prefix', 'anaconda', 'quetz', 'artifactory', 's3')"),
        ([], f"name a target; {ACCEPTED}"),
        (["--dry-run"], f"name a target; {ACCEPTED}"),
        (["prefix"], "the following arguments are required: --to"),
        ([*QUETZ, "--api-key", "k"], "--api-key is not accepted"),
        ([*QUETZ, "--frobnicate"], "unknown option --frobnicate (value not shown); accepted: --help, --to, --url"),
        (["prefix", "--to", "c", "--cuda", "11.8"], "unknown CUDA version '11.8'; accepted: 12.9, 13.0"),
        (["prefix", "--to", "c", "--python", "three"], "unknown Python version 'three'"),
        (["s3", "--to", "https://bucket/x", "--region", "r"], "--to for s3 must look like s3://"),
        (["s3", "--to", "s3://bucket/x"], "s3 needs --region"),
        # nan and inf polled the server without end (40,747 repodata reads in 3 s), a negative number never
        (["--verify-timeout", "nan", *QUETZ], "argument --verify-timeout: 'nan' is not a number of seconds >= 0"),
        ([*QUETZ, "--verify-timeout", "-1"], "argument --verify-timeout: '-1' is not a number of seconds >= 0"),
        ([*QUETZ, "--verify-timeout=inf"], "argument --verify-timeout: 'inf' is not a number of seconds >= 0"),
        ([*QUETZ, "--verify-timeout", "soon"], "argument --verify-timeout: 'soon' is not a number of seconds >= 0"),
        (["quetz", "--url", "not-a-url", "--to", "c"],
         "argument --url: 'not-a-url' is not an http(s) URL with a host, e.g. https://quetz.example.org"),
        (["artifactory", "--url", "ftp://a.example", "--to", "c"], "argument --url: 'ftp://a.example' is not an http(s)"),
        (["prefix", "--to", "c", "--url", "https://"], "argument --url: 'https://' is not an http(s) URL"),
        (["prefix", "--to", "c", "--url", "https://p.example:99999"], "'https://p.example:99999' is not an http(s)"),
        (["anaconda", "--to", "o", "--url", "api.anaconda.org"], "argument --url: 'api.anaconda.org' is not"),
        (["anaconda", "--to", "o", "--channel-url", "http://[::1"], "argument --channel-url: 'http://[::1' is not"),
        (["s3", "--to", "s3://b/x", "--region", "r", "--endpoint-url", "127.0.0.1:9"],
         "argument --endpoint-url: '127.0.0.1:9' is not an http(s) URL"),
        (["--variants-dir", "/nonexistent", "prefix", "--to", "c"], "variant files: no such directory: /nonexistent"),
    ],
)
def test_usage_errors_are_one_line(upload_cli, capsys, channel, args, message):
    assert upload_cli([*args, "--output-dir", str(channel)] if args and args != ["--dry-run"] else args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err, err


@pytest.mark.parametrize(
    "args",
    [
        [*QUETZ, "--api-kye=SECRET-VALUE-1"],
        [*QUETZ, "--api-kye", "SECRET-VALUE-1"],
        [*QUETZ, "--token=SECRET-VALUE-1"],
        [*QUETZ, "--token", "SECRET-VALUE-1"],
        ["--token=SECRET-VALUE-1", *QUETZ],
        ["--api-kye", "SECRET-VALUE-1", *QUETZ],
        ["artifactory", "--url", "http://a.example", "--c=SECRET-VALUE-1"],  # was ambiguous: --channel-url, --cuda
        [*QUETZ, "--ver=SECRET-VALUE-1"],  # was ambiguous among the common options, to `ssm-conda upload` itself too
        # an abbreviation of --channel-url, whose error quoted the value: no abbreviation is taken
        ["artifactory", "--url", "http://a.example", "--to", "r", "--chan", "SECRET-VALUE-1"],
        ["--dry", "prefix", "--to", "SECRET-VALUE-1"],
        [*QUETZ, "SECRET-VALUE-1"],
    ],
)
def test_a_mistyped_secret_option_is_never_echoed(upload_cli, capsys, args):
    """The old parser answered `unrecognized arguments: --api-kye=SECRET-VALUE-1`."""
    assert upload_cli(args) == 2
    err = capsys.readouterr().err
    assert "SECRET-VALUE-1" not in err and len(err.strip().splitlines()) == 1, err
    named = ("--api-kye", "--token", "--c=", "--ver=", "--chan", "--dry")
    option = next((a.split("=")[0] for a in args if a.startswith(named)), None)
    assert option is None or option in err, err


OLD_DESTINATION = "is not accepted (value not shown): upload's destination is --to (-c/--channel names a channel to read from"


@pytest.mark.parametrize(
    "args",
    [
        ["prefix", "--channel", "SECRET-VALUE-1"],
        ["prefix", "--to", "c", "--channel=SECRET-VALUE-1"],
        ["--channel", "SECRET-VALUE-1", "quetz", "--url", "http://q.example"],
        ["-c", "SECRET-VALUE-1", "prefix", "--to", "c"],
        ["prefix", "--to", "c", "-cSECRET-VALUE-1"],
        # not taken for an abbreviation of --channel-url, which these two have
        ["artifactory", "--url", "http://a.example", "--channel", "SECRET-VALUE-1"],
        ["anaconda", "--channel", "SECRET-VALUE-1"],
        ["s3", "--channel", "s3://SECRET-VALUE-1", "--region", "r"],
    ],
)
def test_the_old_destination_option_names_the_new_one(upload_cli, capsys, args):
    """upload's destination was -c/--channel, which every other command reads from: now --to, on every target."""
    assert upload_cli(args) == 2
    err = capsys.readouterr().err
    flag = "-c" if any(a.startswith("-c") and not a.startswith("--") for a in args) else "--channel"
    assert f"{flag} {OLD_DESTINATION}" in err and "SECRET-VALUE-1" not in err and len(err.strip().splitlines()) == 1, err


def test_every_target_takes_to_and_none_a_channel():
    parser = cli.build_parser(["upload"])
    upload = next(a for a in parser._subparsers._group_actions[0].choices.values() if a.prog.endswith("upload"))
    for name, target in upload._subparsers._group_actions[0].choices.items():
        flags = target._option_string_actions
        assert flags["--to"].required and "--channel" not in flags and "-c" not in flags, name
        assert {"--output-dir", "--variants-dir", "--package", "--workspace", "-v"} <= flags.keys(), name


GLOBALS = [
    (["--output-dir", "/somewhere"], "output_dir", Path("/somewhere")),
    (["--variants-dir", "/variants"], "variants_dir", Path("/variants")),
    (["--workspace", "/checkout"], "workspace", Path("/checkout")),
    (["--dry-run"], "dry_run", True),
    (["--skip-existing"], "skip_existing", True),
    (["--cuda", "13.0"], "cuda", "13.0"),
    (["--python", "3.12"], "python", "3.12"),
    (["--torch", "2.13"], "torch", "2.13"),
    (["-v"], "verbose", True),
    (["--verify-timeout", "7"], "verify_timeout", 7.0),
    (["--no-verify"], "no_verify", True),
]


@pytest.mark.parametrize(("option", "dest", "value"), GLOBALS, ids=[g[1] for g in GLOBALS])
@pytest.mark.parametrize("where", ["before", "after"])
def test_global_options_before_or_after_the_target(option, dest, value, where):
    args = ["upload", *option, *QUETZ] if where == "before" else ["upload", *QUETZ, *option]
    parsed = cli.parse_args(args)
    assert getattr(parsed, dest) == value and parsed.target == "quetz"
    defaults = cli.parse_args(["upload", *QUETZ])
    others = {k: v for k, v in vars(defaults).items() if k not in (dest, "_command")}
    assert {k: getattr(parsed, k) for k in others} == others


@pytest.mark.parametrize("where", ["before", "after"])
def test_dry_run_either_side_of_the_target(upload_cli, fake_server, capsys, channel, where):
    server = fake_server()
    common = ["--dry-run", "--output-dir", str(channel)]
    args = [*common, *QUETZ] if where == "before" else [*QUETZ, *common]
    assert upload_cli(args) == 0
    out = capsys.readouterr().out
    assert "dry run: 3 package(s)" in out and "http://q.example/get/c/linux-64/" in out
    assert server.calls == [] and server.urls == []


def test_dry_run_contacts_nothing(upload_cli, fake_server, capsys, channel, built):
    server = fake_server()
    assert upload_cli(["anaconda", "--to", "me", "--dry-run", "--output-dir", str(channel)]) == 0
    out = capsys.readouterr().out
    assert server.calls == [] and server.urls == []
    assert "dry run: 3 package(s)" in out and "none found" in out
    for pkg in built:
        assert f"https://conda.anaconda.org/me/linux-64/{pkg.name}" in out


def test_existing_package_refused_then_skipped(upload_cli, fake_server, capsys, channel, built):
    server = fake_server(present=[built[0]])
    env = {"PREFIX_API_KEY": "pfx-secret-123"}
    assert upload_cli(["prefix", "--to", "c", "--output-dir", str(channel)], env) == 1
    captured = capsys.readouterr()
    assert "1 package(s) already in" in captured.err and "--skip-existing" in captured.err
    assert server.calls == []
    assert re.search(rf"{re.escape(built[0].name)}\s.*exists", captured.out)

    assert upload_cli(["--skip-existing", "prefix", "--to", "c", "--output-dir", str(channel)], env) == 0
    out = capsys.readouterr().out
    assert len(server.calls) == 2 and built[0].name not in {Path(c["package_files"][0]).name for _, c in server.calls}
    assert "done: 2 uploaded, 1 skipped" in out
    assert server.calls[0][1]["skip_existing"] is True


@pytest.mark.parametrize("served", ["changed", "unlisted"])
def test_skip_existing_fails_on_another_build_under_the_same_name(served, upload_cli, fake_server, capsys, channel, built,
                                                                   tmp_path):
    """Build strings hash the variant keys only: a recipe or patch change keeps the file name. Before,
    --skip-existing (CI's publish) noted "with a different sha256", exited 0 and the old build stayed served."""
    changed = good_package(tmp_path / "changed", text="patched recipe")  # VARIANTS[0], as built[0]
    assert changed.name == built[0].name and sha256_of(changed) != sha256_of(built[0])
    server = fake_server(present={changed.name: sha256_of(changed) if served == "changed" else ""})
    assert upload_cli(["--skip-existing", "prefix", "--to", "c", "--output-dir", str(channel)], ENV) == 1
    captured = capsys.readouterr()
    there = sha256_of(changed)[:12] if served == "changed" else "none listed"
    assert captured.err.strip() == (
        f"error: {changed.name} is already in https://prefix.dev/c with another sha256 ({there}, this file's "
        f"{sha256_of(built[0])[:12]}): bump build.number in recipe/causal-conv1d/recipe.yaml and rebuild, a changed "
        "build needs a new file name; nothing was uploaded")
    assert server.calls == []
    assert re.search(rf"{re.escape(changed.name)}\s.*exists\s.*with another sha256", captured.out)
    assert "skipped" not in captured.out


def test_failure_midway_reports_what_went(upload_cli, fake_server, capsys, channel, built):
    order = sorted(p.name for p in built)
    server = fake_server(fail_upload=lambda name: name == order[1])
    assert upload_cli(["prefix", "--to", "c", "--output-dir", str(channel)], {"PREFIX_API_KEY": "pfx-secret-123"}) == 1
    captured = capsys.readouterr()
    assert len(server.calls) == 2
    assert re.search(rf"{re.escape(order[0])}\s.*uploaded", captured.out)
    assert re.search(rf"{re.escape(order[1])}\s.*failed\s.*Server responded with error: 500", captured.out)
    assert re.search(rf"{re.escape(order[2])}\s.*not attempted", captured.out)
    assert captured.err.strip() == (f"error: {order[1]}: Server responded with error: 500 Internal Server Error "
                                    "(1 of 3 uploaded)")


def test_not_served_within_the_bound(upload_cli, fake_server, capsys, channel):
    fake_server(lists_uploads=False)
    args = ["prefix", "--to", "c", "--cuda", "12.9", "--verify-timeout", "0.2", "--output-dir", str(channel)]
    assert upload_cli(args, {"PREFIX_API_KEY": "pfx-secret-123"}) == 1
    captured = capsys.readouterr()
    assert "uploaded but not listed in https://prefix.dev/c/linux-64/repodata.json after 0s" in captured.err
    assert "not served" in captured.out


def test_secret_in_an_upload_error_is_masked(upload_cli, fake_server, capsys, channel):
    server = fake_server(fail_upload=lambda name: True, error="401 Unauthorized\nwhile sending token pfx-leaky-secret")
    args = ["prefix", "--to", "c", "--cuda", "12.9", "--output-dir", str(channel)]
    assert upload_cli(args, {"PREFIX_API_KEY": "pfx-leaky-secret"}) == 1
    captured = capsys.readouterr()
    assert "pfx-leaky-secret" not in captured.out + captured.err
    assert "while sending token **** ($PREFIX_API_KEY was refused)" in captured.err
    assert len(captured.err.strip().splitlines()) == 1 and len(server.calls) == 1


def test_unreachable_server_is_one_line(upload_cli, capsys, channel):
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = ["quetz", "--url", f"http://127.0.0.1:{port}", "--to", "c", "--output-dir", str(channel)]
    assert upload_cli(args, {"QUETZ_API_KEY": "qz-secret-000"}) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot reach quetz at http://127.0.0.1:{port}/") and "refused" in err
    assert len(err.strip().splitlines()) == 1 and "qz-secret-000" not in err


def test_s3_unreachable_is_one_line(upload_cli, capsys, channel):
    pytest.importorskip("boto3")
    args = ["s3", "--to", "s3://b/ch", "--endpoint-url", "http://127.0.0.1:9", "--region", "us-east-1",
            "--addressing-style", "path", "--output-dir", str(channel)]
    assert upload_cli(args, {"AWS_ACCESS_KEY_ID": "AKIAXX", "AWS_SECRET_ACCESS_KEY": "s3-secret-x"}) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot reach S3 at http://127.0.0.1:9") and len(err.strip().splitlines()) == 1


def test_build_selectors_choose_what_to_upload(upload_cli, fake_server, capsys, channel):
    """upload takes build's selectors: a GPU generation and a package name choose too."""
    fake_server()
    common = [*QUETZ, "--dry-run", "--output-dir", str(channel)]
    assert upload_cli([*common, "--cuda", "13.0", "--generation", "sm90"]) == 0
    out = capsys.readouterr().out
    assert "dry run: 1 package(s)" in out and "_sm90_h" in out
    assert upload_cli([*common, "--package", "mamba-ssm"]) == 2
    assert "no package in" in capsys.readouterr().err


def test_a_password_in_a_url_is_never_shown(upload_cli, fake_server, capsys, channel):
    fake_server()
    args = ["quetz", "--url", "https://alice:hunter2-pass@q.example", "--to", "c", "--output-dir", str(channel)]
    assert upload_cli([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "hunter2-pass" not in out and "alice" not in out
    assert "to quetz https://****@q.example/get/c" in out and "https://****@q.example/get/c/linux-64/" in out
    assert upload_cli(["quetz", "--url", "ftp://alice:hunter2-pass@q.example", "--to", "c"]) == 2
    err = capsys.readouterr().err
    assert "'ftp://****@q.example' is not an http(s) URL" in err and "hunter2-pass" not in err


def test_a_password_in_an_unreachable_url_is_never_shown(upload_cli, capsys, channel):
    args = ["quetz", "--url", "http://alice:hunter2-pass@127.0.0.1:9", "--to", "c", "--output-dir", str(channel)]
    assert upload_cli(args, {"QUETZ_API_KEY": "qz-secret-000"}) == 1
    captured = capsys.readouterr()
    assert "hunter2-pass" not in captured.out + captured.err and "alice" not in captured.out + captured.err
    assert captured.err.startswith("error: cannot reach quetz at http://****@127.0.0.1:9/"), captured.err
