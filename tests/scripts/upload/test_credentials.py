"""Where credentials come from: the environment first, else rattler's own auth storage (here
$RATTLER_AUTH_FILE or ~/.rattler/credentials.json under a temporary HOME, read by the real
py-rattler-build), and for S3 the AWS credential chain as boto3 resolves it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ssm_conda import cli
from ssm_conda.upload import targets
from ssm_conda.upload.command import resolve

QUETZ = ["quetz", "--url", "https://q.example", "--to", "c"]


def target(args: list[str], env: dict[str, str]):
    return resolve(cli.parse_args(["upload", *args]), env).target


def write_json(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_environment_comes_first_and_is_passed(tmp_path):
    write_json(Path.home() / ".rattler" / "credentials.json", {"q.example": {"CondaToken": "from-storage-1"}})
    quetz = target(QUETZ, {"QUETZ_API_KEY": "from-env-2"})
    assert (quetz.find_credential(), quetz.read_headers()) == ("$QUETZ_API_KEY (****)", {"X-API-Key": "from-env-2"})


@pytest.mark.parametrize(
    ("args", "entry", "found"),
    [
        (QUETZ, {"q.example": {"CondaToken": "x"}}, True),
        (QUETZ, {"q.example": {"BearerToken": "x"}}, False),  # Quetz takes a CondaToken
        (QUETZ, {"other.example": {"CondaToken": "x"}}, False),
        (["quetz", "--url", "http://127.0.0.1:9", "--to", "c"], {"127.0.0.1:9": {"CondaToken": "x"}}, False),
        (["prefix", "--to", "c"], {"*.prefix.dev": {"BearerToken": "x"}}, True),
        (["anaconda", "--to", "me"], {"api.anaconda.org": {"CondaToken": "x"}}, True),
        (["artifactory", "--url", "https://a.example/artifactory", "--to", "c"],
         {"a.example": {"BasicHTTP": {"username": "u", "password": "p"}}}, True),
        (["artifactory", "--url", "https://a.example/artifactory", "--to", "c"], {"a.example": {"CondaToken": "x"}},
         False),
    ],
)
@pytest.mark.parametrize("where", ["home", "RATTLER_AUTH_FILE"])
def test_logged_in_user_is_found_in_rattlers_storage(args, entry, found, where, tmp_path):
    """`rattler-build auth login` without a keyring writes ~/.rattler/credentials.json; the real
    py-rattler-build is asked (no files, nothing sent) whether it finds a credential there."""
    if where == "home":
        env = {}
        write_json(Path.home() / ".rattler" / "credentials.json", entry)
    else:
        env = {"RATTLER_AUTH_FILE": str(write_json(tmp_path / "auth.json", entry))}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        credential = target(args, env).find_credential()
    if found:
        assert credential is not None and credential.startswith("rattler's auth storage") and "****" not in credential
    else:
        assert credential is None


S3 = ["s3", "--to", "s3://bucket/chan", "--region", "us-east-1"]


def test_s3_keys_come_from_the_aws_credential_chain(monkeypatch, capsys):
    assert target(S3, {}).find_credential() is None
    config = Path.home() / ".aws" / "credentials"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[ci]\naws_access_key_id = AKIAPROFILE1\naws_secret_access_key = profile-secret-1\n")
    monkeypatch.setenv("AWS_PROFILE", "ci")
    assert target(S3, {}).find_credential() == "the AWS credential chain (shared-credentials-file)"
    assert targets.mask("AKIAPROFILE1 profile-secret-1") == "**** ****"  # the profile's keys were found
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAENV1")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret-1")
    assert target(S3, {}).find_credential() == "the AWS credential chain (env)"
    assert targets.mask("AKIAENV1 env-secret-1 profile-secret-1") == "**** **** ****"


def test_masking_covers_every_registered_value():
    targets.register_secret("mask-me-please")
    assert targets.one_line("a\nmask-me-please\n  b") == "a **** b"
    targets.register_secret("abc")  # too short to mask without mangling ordinary words
    assert targets.mask("abc") == "abc"


@pytest.mark.parametrize(
    ("content", "where"),
    [("{not json", " at line 1 column 2"), ('["q.example"]', " at line 1 column 0"),
     ('{"q.example": "tok-secret-1"}', " at line 1 column 28"),
     ('{"q.example": {"ApiKey": "tok-secret-1"}}', " at line 1 column 23")],
    ids=["not-json", "a-list", "a-bare-token", "an-unknown-kind"],
)
@pytest.mark.parametrize("location", ["RATTLER_AUTH_FILE", "home"])
@pytest.mark.parametrize("key", [None, "qz-env-key-1"])
def test_a_malformed_auth_file_is_one_line_naming_it(content, where, location, key, upload_cli, capsys, channel, tmp_path):
    """rattler-build read a malformed file as "no credentials"; py-rattler's client (our repodata reads)
    refuses it. Either way the user learns which file, never the token rattler's parser quotes."""
    path = tmp_path / "auth.json" if location == "RATTLER_AUTH_FILE" else Path.home() / ".rattler" / "credentials.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    env = {"RATTLER_AUTH_FILE": str(path)} if location == "RATTLER_AUTH_FILE" else {}
    env.update({"QUETZ_API_KEY": key} if key else {})  # a key in the environment: our reads still use the storage
    assert upload_cli([*QUETZ, "--dry-run", "--output-dir", str(channel)], env) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"error: failed to parse {path}{where}: not what rattler's auth storage holds (JSON: each host "
                           "mapped to its BearerToken, CondaToken or BasicHTTP entry); fix it, or log in again with "
                           "`rattler-build auth login`")
    assert "tok-secret-1" not in err


def test_a_url_password_is_masked_in_every_message():
    targets.register_secret("s3cr3t-pw")
    masked = targets.mask("GET http://bob:s3cr3t-pw@h.example/x failed; s3cr3t-pw")
    assert masked == "GET http://****@h.example/x failed; ****"
    assert targets.mask("https://a:b@h.example and git@github.com") == "https://****@h.example and git@github.com"
