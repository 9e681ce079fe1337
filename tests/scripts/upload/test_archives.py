"""The packages chosen for upload and the all-or-nothing pre-check, on small real packages."""

from __future__ import annotations

import shutil

from ssm_conda.matrix import Selection
from ssm_conda.upload import archives


def test_selectors_match_the_build_string(channel):
    """Packages named as the recipes name them today (the GPU generation in the build string): the
    selectors choose what rattler-build renders for them. Before, a regex without the generation
    matched no package, and --cuda/--python/--torch uploaded nothing."""
    packages = archives.local_packages(channel)
    for pkg in packages:
        archives.check_package(pkg, {})

    def names(**kw):
        return sorted(p.variant for p in archives.filter_packages(packages, Selection(**kw)))

    everything = ["cuda129_py312_torch213_all", "cuda130_py311_torch212_sm90", "cuda130_py312_torch213_all"]
    assert names() == everything
    assert names(cuda="13.0") == everything[1:]
    assert names(cuda="13.0", python="3.12") == ["cuda130_py312_torch213_all"]
    assert names(torch="2.12") == ["cuda130_py311_torch212_sm90"]
    assert names(python="3.10") == []


def test_no_match_is_an_error(upload_cli, capsys, channel):
    assert upload_cli(["prefix", "--channel", "c", "--python", "3.10", "--output-dir", str(channel)]) == 2
    assert "no package in" in capsys.readouterr().err


def test_missing_output_dir(upload_cli, capsys, tmp_path):
    assert upload_cli(["prefix", "--channel", "c", "--output-dir", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_precheck_rejects_junk_and_uploads_nothing(upload_cli, fake_server, capsys, channel):
    server = fake_server()
    (channel / "noarch" / "causal-conv1d-1.7.0-cuda130_py313_torch213_h0_0.conda").write_bytes(b"junk")
    assert upload_cli(["prefix", "--channel", "c", "--output-dir", str(channel)], {"PREFIX_API_KEY": "pfx-secret-123"}) == 1
    captured = capsys.readouterr()
    assert "not a valid .conda archive" in captured.err and "nothing was uploaded" in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert server.calls == [] and server.probes == [] and server.urls == []
    assert "invalid" in captured.out and "not attempted" in captured.out


def test_precheck_rejects_renamed_and_misplaced_files(channel, built):
    renamed = channel / "noarch" / "causal-conv1d-9.9.9-cuda130_py312_torch213_h0_0.conda"
    shutil.copy2(built[0], renamed)
    pkg = archives.LocalPackage(renamed, "noarch", size=renamed.stat().st_size)
    archives.check_package(pkg, {})
    assert "does not match its index.json" in pkg.problem

    misplaced = channel / "linux-64" / built[0].name
    shutil.copy2(built[0], misplaced)
    pkg = archives.LocalPackage(misplaced, "linux-64", size=misplaced.stat().st_size)
    archives.check_package(pkg, {})
    assert "index.json says subdir noarch" in pkg.problem

    pkg = archives.LocalPackage(channel / "noarch" / built[0].name, "noarch", size=built[0].stat().st_size)
    archives.check_package(pkg, {built[0].name: "0" * 64})
    assert "sha256 differs" in pkg.problem


def test_truncated_conda_is_invalid(channel, built):
    data = built[0].read_bytes()
    path = channel / "noarch" / built[0].name
    path.write_bytes(data[: len(data) // 2])
    pkg = archives.LocalPackage(path, "noarch", size=path.stat().st_size)
    archives.check_package(pkg, {})
    assert pkg.problem and "archive" in pkg.problem


def test_one_bad_archive_names_the_count(channel, built):
    for name in ("a-1-h0_0.conda", "b-1-h0_0.conda"):
        (channel / "noarch" / name).write_bytes(b"")
    packages = archives.local_packages(channel)
    invalid = archives.check_all(packages, channel)
    assert [p.filename for p in invalid] == ["a-1-h0_0.conda", "b-1-h0_0.conda"]
    assert archives.invalid_message(invalid, channel) == (
        "noarch/a-1-h0_0.conda: empty file (and 1 more invalid); nothing was uploaded"
    )
