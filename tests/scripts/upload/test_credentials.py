"""Where credentials come from: the environment, $RATTLER_AUTH_FILE, or rattler-build's own auth
storage (here ~/.rattler/credentials.json under a temporary HOME, read by the real py-rattler-build)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ssm_conda import cli
from ssm_conda.upload import credentials
from ssm_conda.upload.options import TARGET_CLASSES


@pytest.mark.parametrize(
    ("url", "keys"),
    [
        ("https://repo.prefix.dev", ["repo.prefix.dev", "*.repo.prefix.dev", "*.prefix.dev", "*.dev"]),
        ("http://127.0.0.1:8000", ["127.0.0.1"]),  # no port, no wildcards for an address
        ("https://api.anaconda.org", ["api.anaconda.org", "*.api.anaconda.org", "*.anaconda.org", "*.org"]),
        ("s3://bucket/some/channel", ["bucket", "s3://bucket/some/channel", "s3://bucket/some", "s3://bucket"]),
    ],
)
def test_lookup_keys_follow_rattler(url, keys):
    assert credentials.lookup_keys(url) == keys


def target(args: list[str], env: dict[str, str]):
    parsed = cli.parse_args(["upload", *args])
    return TARGET_CLASSES[parsed.target](parsed, env)


def write_json(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_auth_file_names_the_key_rattler_uses(tmp_path):
    """The old lookup named the first wildcard in the file, whatever it matched."""
    auth = write_json(tmp_path / "auth.json", {"*.example.org": {"BearerToken": "other-token-1"},
                                               "*.prefix.dev": {"BearerToken": "prefix-token-2"}})
    found = target(["prefix", "--channel", "c", "--url", "https://repo.prefix.dev"],
                   {"RATTLER_AUTH_FILE": str(auth)}).find_credential()
    assert found.source == "$RATTLER_AUTH_FILE[*.prefix.dev]" and found.token == "prefix-token-2"
    assert found.auth_file == auth and not found.passed


def test_a_key_with_a_port_is_not_what_rattler_reads(tmp_path):
    """rattler looks up the host without its port: an entry under host:port is never used."""
    auth = write_json(tmp_path / "auth.json", {"127.0.0.1:9": {"CondaToken": "never-used"}})
    quetz = target(["quetz", "--url", "http://127.0.0.1:9", "--channel", "c"], {"RATTLER_AUTH_FILE": str(auth)})
    assert quetz.find_credential() is None


def test_environment_comes_first_and_is_passed(tmp_path):
    auth = write_json(tmp_path / "auth.json", {"q.example": {"CondaToken": "from-file-1"}})
    found = target(["quetz", "--url", "https://q.example", "--channel", "c"],
                   {"RATTLER_AUTH_FILE": str(auth), "QUETZ_API_KEY": "from-env-2"}).find_credential()
    assert (found.source, found.token, found.passed) == ("$QUETZ_API_KEY", "from-env-2", True)


@pytest.mark.parametrize(
    ("args", "entry", "found"),
    [
        (["quetz", "--url", "https://q.example", "--channel", "c"], {"q.example": {"CondaToken": "x"}}, True),
        (["quetz", "--url", "https://q.example", "--channel", "c"], {"q.example": {"BearerToken": "x"}}, False),
        (["quetz", "--url", "https://q.example", "--channel", "c"], {"other.example": {"CondaToken": "x"}}, False),
        (["prefix", "--channel", "c"], {"*.prefix.dev": {"BearerToken": "x"}}, True),
        (["anaconda", "--owner", "me"], {"api.anaconda.org": {"CondaToken": "x"}}, True),
        (["artifactory", "--url", "https://a.example/artifactory", "--channel", "c"],
         {"a.example": {"BasicHTTP": {"username": "u", "password": "p"}}}, True),
    ],
)
def test_logged_in_user_is_found_in_rattlers_storage(monkeypatch, args, entry, found):
    """`rattler-build auth login` without a keyring writes ~/.rattler/credentials.json; the real
    py-rattler-build is asked (no files, nothing sent) whether it finds a credential there."""
    write_json(Path.home() / ".rattler" / "credentials.json", entry)
    credential = target(args, {}).find_credential()
    if found:
        assert credential is not None and credential.token is None and not credential.passed
        assert "rattler-build's auth storage" in credential.describe()
    else:
        assert credential is None


def test_masking_covers_every_registered_value():
    credentials.register_secret("mask-me-please")
    assert credentials.one_line("a\nmask-me-please\n  b") == "a **** b"
    credentials.register_secret("abc")  # too short to mask without mangling ordinary words
    assert credentials.mask("abc") == "abc"
