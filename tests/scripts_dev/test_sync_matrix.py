"""ssm-conda-dev sync-matrix against a local channel shaped like conda-forge's pytorch records: CPU and
CUDA builds, several CUDA versions, both linux platforms and win-64, read through py-rattler."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from ssm_conda.matrix import load_variant_files
from ssm_conda_dev import cli

from tests.repo import VARIANTS_DIR


def record(version: str, build: str, subdir: str) -> dict:
    return {"name": "pytorch", "version": version, "build": build, "build_number": int(build.rsplit("_", 1)[1]),
            "depends": ["python >=3.12,<3.13.0a0"], "subdir": subdir, "license": "BSD-3-Clause",
            "md5": "0" * 32, "sha256": "0" * 64, "size": 1}


# (version, build strings) on linux-64; linux-aarch64 has the same unless listed in ONLY_X86
BUILDS = {
    "2.9.1": ["cpu_mkl_py312_h1111111_100", "cuda129_mkl_py312_h2222222_300"],  # older than every --oldest here
    "2.10.0": ["cuda129_mkl_py312_h3333333_300", "cuda130_generic_py312_h4444444_300", "cpu_generic_py312_h5555555_0"],
    "2.11.0": ["cuda129_mkl_py312_h3333333_300", "cuda130_generic_py312_h4444444_300"],
    "2.12.0": ["cuda130_generic_py312_h4444444_200", "cuda130_generic_py313_h4444444_200"],  # one CUDA line only
    "2.13.0": ["cuda129_mkl_py312_h6666666_100", "cuda130_generic_py312_h7777777_100"],
    "2.14.0": ["cpu_mkl_py312_h8888888_0", "cpu_generic_py313_h8888888_0"],  # CPU builds only
    "2.15.0": ["cuda130_generic_py312_h9999999_0"],
}
ONLY_X86 = {"2.15.0"}  # not built for linux-aarch64 yet
# win-64 has linux-64's builds but no CUDA 12.9 one: the recipes render no win-64 variant of CUDA 12.9, so none is asked for


def conda_forge_like(root: Path, not_on_windows: frozenset[str] = frozenset()) -> Path:
    for subdir in ("linux-64", "linux-aarch64", "win-64", "noarch"):
        packages = {}
        for version, builds in BUILDS.items():
            if subdir == "noarch" or (subdir == "linux-aarch64" and version in ONLY_X86):
                continue
            if subdir == "win-64" and version in not_on_windows:
                continue
            for build in builds:
                if subdir == "win-64" and build.startswith("cuda129_"):
                    continue
                packages[f"pytorch-{version}-{build}.conda"] = record(version, build, subdir)
        (root / subdir).mkdir(parents=True)
        (root / subdir / "repodata.json").write_text(json.dumps({"info": {"subdir": subdir}, "packages": {},
                                                                 "packages.conda": packages}))
    return root


@pytest.fixture
def setup(tmp_path, monkeypatch):
    monkeypatch.setenv("SSM_CONDA_CACHE", str(tmp_path / "cache"))
    variants = tmp_path / "variants"
    shutil.copytree(VARIANTS_DIR, variants)
    return conda_forge_like(tmp_path / "channel"), variants


def torches(variants: Path) -> dict[str, list[str]]:
    return {f.cuda: f.torches for f in load_variant_files(variants)}


def test_lists_follow_the_channel_and_keep_the_comments(setup, capsys):
    channel, variants = setup
    before = {p.name: p.read_text() for p in variants.glob("*.yaml")}
    assert cli.main(["sync-matrix", "--channel", str(channel), "--variants-dir", str(variants)]) == 0
    # cuda129: 2.12 has no CUDA 12.9 build; cuda130: 2.14 is CPU-only, 2.15 has no aarch64 build yet
    assert torches(variants) == {"12.9": ["2.10", "2.11", "2.13"], "13.0": ["2.10", "2.11", "2.12", "2.13"]}
    out = capsys.readouterr().out
    assert "variants/cuda129.yaml: pytorch 2.10, 2.11, 2.12, 2.13 -> 2.10, 2.11, 2.13; dropped 2.12 (no CUDA 12.9 build" in out
    assert "variants/cuda130.yaml: pytorch 2.10, 2.11, 2.12, 2.13 (unchanged)" in out
    after = (variants / "cuda129.yaml").read_text()
    assert [line for line in after.splitlines() if line.startswith("#")] == [
        line for line in before["cuda129.yaml"].splitlines() if line.startswith("#")]
    assert after == before["cuda129.yaml"].replace('  - "2.12"\n', "")  # nothing else moved
    assert (variants / "cuda130.yaml").read_text() == before["cuda130.yaml"]


def test_a_new_minor_is_added_where_every_platform_has_it(setup, capsys):
    channel, variants = setup
    args = ["sync-matrix", "--channel", str(channel), "--variants-dir", str(variants)]
    assert cli.main([*args, "--target-platform", "linux-64", "--oldest", "2.11"]) == 0
    assert torches(variants)["13.0"] == ["2.11", "2.12", "2.13", "2.15"]
    assert "added 2.15; dropped 2.10" in capsys.readouterr().out


def test_dry_run_writes_nothing(setup, capsys):
    channel, variants = setup
    before = {p.name: p.read_text() for p in variants.glob("*.yaml")}
    assert cli.main(["sync-matrix", "--channel", str(channel), "--variants-dir", str(variants), "--dry-run"]) == 0
    assert {p.name: p.read_text() for p in variants.glob("*.yaml")} == before
    assert "dry run: nothing written" in capsys.readouterr().out


def test_only_the_platforms_the_recipes_render_a_file_for_count(setup, tmp_path, capsys):
    """win-64 counts for CUDA 13.0 (causal-conv1d renders it there) and not for 12.9 (its build.skip): a minor missing
    on win-64 leaves 13.0's list and stays in 12.9's, and no win-64 CUDA 12.9 build is asked for."""
    _, variants = setup
    channel = conda_forge_like(tmp_path / "no-2.11-on-windows", not_on_windows=frozenset({"2.11.0"}))
    assert cli.main(["sync-matrix", "--channel", str(channel), "--variants-dir", str(variants)]) == 0
    assert torches(variants) == {"12.9": ["2.10", "2.11", "2.13"], "13.0": ["2.10", "2.12", "2.13"]}
    out = capsys.readouterr().out
    assert "dropped 2.11 (no CUDA 13.0 build on linux-64, linux-aarch64, win-64)" in out
    assert "dropped 2.12 (no CUDA 12.9 build on linux-64, linux-aarch64)" in out
    assert cli.main(["sync-matrix", "--channel", str(channel), "--variants-dir", str(variants), "--target-platform",
                     "win-64", "--oldest", "2.10", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "variants/cuda129.yaml: the recipes render no variant of it on win-64 (left as is)" in out
    assert "variants/cuda130.yaml: pytorch 2.10, 2.12, 2.13 -> 2.10, 2.12, 2.13, 2.15; added 2.15" in out


@pytest.mark.parametrize(
    ("extra", "status", "message"),
    [
        (["--oldest", "two"], 2, "--oldest 'two' is not a pytorch minor; accepted: X.Y"),
        (["--oldest", "2.16"], 1, "has no pytorch >= 2.16 built with CUDA 12.9 on linux-64, linux-aarch64; nothing was written"),
        (["--target-platform", "osx-arm64"], 2, "invalid choice: 'osx-arm64'"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(setup, capsys, extra, status, message):
    channel, variants = setup
    before = {p.name: p.read_text() for p in variants.glob("*.yaml")}
    assert cli.main(["sync-matrix", "--channel", str(channel), "--variants-dir", str(variants), *extra]) == status
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert {p.name: p.read_text() for p in variants.glob("*.yaml")} == before


def test_a_channel_without_pytorch_changes_nothing(setup, tmp_path, capsys):
    _, variants = setup
    empty = tmp_path / "empty"
    for subdir in ("linux-64", "linux-aarch64", "win-64", "noarch"):
        (empty / subdir).mkdir(parents=True)
        (empty / subdir / "repodata.json").write_text(json.dumps({"info": {"subdir": subdir}, "packages": {}}))
    assert cli.main(["sync-matrix", "--channel", str(empty), "--variants-dir", str(variants)]) == 1
    assert "has no pytorch >= 2.10 built with CUDA 12.9" in capsys.readouterr().err
