"""What each server is sent: the py-rattler-build calls (bound to their real signatures) and the
repodata reads, for prefix.dev, anaconda.org, Quetz and Artifactory."""

from __future__ import annotations

import pytest
import rattler_build
from ssm_conda.upload import targets

# -------------------------------------------------------------------------- the fake's binding


def test_a_wrong_keyword_fails_the_run(upload_cli, fake_server, monkeypatch, channel):
    """The mocks are autospecs: code calling py-rattler-build with a keyword it does not take
    (here Artifactory's `token` for Quetz) fails the test instead of being recorded."""
    fake_server()

    def drifted(self, files, key):
        rattler_build.upload_package_to_quetz(files, self.url, self.to, token=key)

    monkeypatch.setattr(targets.QuetzTarget, "rattler_upload", drifted)
    args = ["quetz", "--url", "https://q.example", "--to", "c", "--output-dir", str(channel)]
    with pytest.raises(TypeError, match="unexpected keyword argument 'token'"):
        upload_cli(args, {"QUETZ_API_KEY": "qz-secret-1"})


# -------------------------------------------------------------------------------------- prefix


def test_prefix_upload_request(upload_cli, fake_server, capsys, channel):
    server = fake_server()
    args = ["prefix", "--to", "my-chan", "--cuda", "13.0", "--output-dir", str(channel)]
    assert upload_cli(args, {"PREFIX_API_KEY": "pfx-secret-123"}) == 0
    assert [fn for fn, _ in server.calls] == ["upload_package_to_prefix"] * 2
    call = server.calls[0][1]
    assert len(call.pop("package_files")) == 1
    assert call == {"url": "https://prefix.dev", "channels": "my-chan", "api_key": "pfx-secret-123",
                    "skip_existing": False, "generate_attestation": False}
    assert ("https://prefix.dev/my-chan/linux-64/repodata.json", {"Authorization": "Bearer pfx-secret-123"}) in server.urls
    out = capsys.readouterr().out
    assert "pfx-secret-123" not in out and "$PREFIX_API_KEY (****)" in out
    assert out.count("uploaded") >= 2 and "done: 2 uploaded, 0 skipped" in out


def test_prefix_trusted_publishing_passes_no_key(upload_cli, fake_server, capsys, channel):
    server = fake_server(stored=True)  # rattler-build does the OIDC exchange
    env = {"ACTIONS_ID_TOKEN_REQUEST_URL": "https://token.actions.example/x",
           "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc-request-token"}
    assert upload_cli(["prefix", "--to", "c", "--torch", "2.12", "--output-dir", str(channel)], env) == 0
    assert server.calls[0][1]["api_key"] is None and server.probes == []
    out = capsys.readouterr().out
    assert "trusted publishing" in out and "oidc-request-token" not in out


def test_prefix_attestation_in_github_actions(upload_cli, fake_server, capsys, channel):
    server = fake_server(stored=True)
    args = ["prefix", "--to", "c", "--torch", "2.12", "--generate-attestation", "--output-dir", str(channel)]
    assert upload_cli(args) == 2  # outside GitHub Actions: no identity to sign with
    assert "--generate-attestation signs with the workflow's identity" in capsys.readouterr().err
    assert server.calls == [] and server.probes == []
    env = {"ACTIONS_ID_TOKEN_REQUEST_URL": "https://token.actions.example/x", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc-t"}
    assert upload_cli(args, env) == 0
    assert [call["generate_attestation"] for _, call in server.calls] == [True]


def test_prefix_without_credentials(upload_cli, fake_server, capsys, channel):
    server = fake_server()
    assert upload_cli(["prefix", "--to", "c", "--output-dir", str(channel)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no credentials for prefix.dev: set PREFIX_API_KEY, or log in with "
                          "`rattler-build auth login prefix.dev --token TOKEN`")
    assert "trusted publishing" in err and len(err.strip().splitlines()) == 1
    assert server.calls == [] and [fn for fn, _ in server.probes] == ["upload_package_to_prefix"]


# --------------------------------------------------------------- logged in with rattler-build


def test_logged_in_user_uploads_through_rattlers_storage(upload_cli, fake_server, capsys, channel):
    """Keyring or ~/.rattler/credentials.json: no key in the environment is not "no credentials"."""
    server = fake_server(stored=True)
    args = ["quetz", "--url", "https://q.example", "--to", "c", "--cuda", "12.9", "--output-dir", str(channel)]
    assert upload_cli([*args, "--dry-run"]) == 0
    assert "credentials: rattler's auth storage" in capsys.readouterr().out
    assert upload_cli(args) == 0
    assert [fn for fn, call in server.probes if call["api_key"] is None] == ["upload_package_to_quetz"] * 2
    call = server.calls[0][1]
    assert call["api_key"] is None
    assert "with rattler's auth storage" in capsys.readouterr().out


def test_refused_stored_credential_says_how_to_log_in(upload_cli, fake_server, capsys, channel):
    fake_server(stored=True, fail_upload=lambda name: True, error="Quetz responded with error: 401 Unauthorized")
    args = ["quetz", "--url", "https://q.example", "--to", "c", "--cuda", "12.9", "--output-dir", str(channel)]
    assert upload_cli(args) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "401 Unauthorized; log in with `rattler-build auth login q.example --conda-token TOKEN`" in err
    assert "or set QUETZ_API_KEY (0 of 1 uploaded)" in err


# ------------------------------------------------------------------------------------ anaconda


def test_anaconda_upload_request(upload_cli, fake_server, capsys, channel):
    server = fake_server()
    args = ["anaconda", "--to", "me", "--label", "dev", "--torch", "2.12", "--output-dir", str(channel)]
    assert upload_cli(args, {"ANACONDA_API_KEY": "ana-secret-456"}) == 0
    fn, call = server.calls[0]
    assert fn == "upload_package_to_anaconda" and len(call.pop("package_files")) == 1
    assert call == {"owner": "me", "channel": ["dev"], "api_key": "ana-secret-456", "url": "https://api.anaconda.org",
                    "force": False}
    assert "https://conda.anaconda.org/me/label/dev/linux-64/repodata.json" in [u for u, _ in server.urls]
    assert "ana-secret-456" not in capsys.readouterr().out


# --------------------------------------------------------------------------------- artifactory


def test_artifactory_upload_request(upload_cli, fake_server, capsys, channel):
    server = fake_server()
    args = ["artifactory", "--url", "https://art.example.com/artifactory", "--to", "conda-local",
            "--cuda", "12.9", "--output-dir", str(channel)]
    assert upload_cli(args, {"ARTIFACTORY_TOKEN": "art-token-789"}) == 0
    fn, call = server.calls[0]
    assert (fn, call["url"], call["channels"], call["token"]) == (
        "upload_package_to_artifactory", "https://art.example.com/artifactory", "conda-local", "art-token-789")
    assert ("https://art.example.com/artifactory/api/conda/conda-local/linux-64/repodata.json",
            {"Authorization": "Bearer art-token-789"}) in server.urls
    assert "art-token-789" not in capsys.readouterr().out
