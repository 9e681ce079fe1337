"""ssm-conda-dev sync-matrix against a local channel shaped like conda-forge's pytorch records: CPU and
CUDA builds, several CUDA versions, both linux platforms and win-64, read through py-rattler."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from ssm_conda.matrix import load_variant_files, plan, read_variant_file
from ssm_conda.selection import Selection
from ssm_conda_dev import cli

from tests.repo import REPO_ROOT, VARIANTS_DIR

CUDA134 = yaml.safe_load((REPO_ROOT / "tests" / "sync_matrix_conda_forge_cuda134.yaml").read_text())


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


def conda_forge_like(root: Path, not_on_windows: frozenset[str] = frozenset(), builds_by_version: dict | None = None,
                     only_x86: set[str] | frozenset[str] = frozenset(ONLY_X86), win_only: dict | None = None) -> Path:
    for subdir in ("linux-64", "linux-aarch64", "win-64", "noarch"):
        packages = {}
        for version, builds in (builds_by_version or BUILDS).items():
            if subdir == "noarch" or (subdir == "linux-aarch64" and version in only_x86):
                continue
            if subdir == "win-64" and version in not_on_windows:
                continue
            for build in [*builds, *((win_only or {}).get(version, []) if subdir == "win-64" else [])]:
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
    assert "empty has no CUDA build of pytorch on linux-64, linux-aarch64, win-64; nothing was written" in capsys.readouterr().err
    assert sorted(p.name for p in variants.glob("*.yaml")) == ["cuda129.yaml", "cuda130.yaml"]  # none deleted


# ------------------------------------------------------------------ CUDA lines: added and dropped


@pytest.fixture
def after_cuda134(tmp_path, monkeypatch):
    """conda-forge after its cuda134 migration (tests/sync_matrix_conda_forge_cuda134.yaml): 12.9 and 13.4, no 13.0."""
    monkeypatch.setenv("SSM_CONDA_CACHE", str(tmp_path / "cache"))
    variants = tmp_path / "variants"
    shutil.copytree(VARIANTS_DIR, variants)
    channel = conda_forge_like(tmp_path / "conda-forge", builds_by_version=CUDA134["builds"],
                               only_x86=set(CUDA134["only_x86"]), win_only=CUDA134["win_only"])
    return channel, variants


def test_a_new_cuda_line_gets_its_file_and_a_dropped_one_loses_it(after_cuda134, capsys):
    channel, variants = after_cuda134
    cuda130 = read_variant_file(variants / "cuda130.yaml", "linux-64")
    before = (variants / "cuda129.yaml").read_text()
    assert cli.main(["sync-matrix", "--channel", str(channel), "--variants-dir", str(variants)]) == 0
    out = capsys.readouterr().out
    assert sorted(p.name for p in variants.glob("*.yaml")) == ["cuda129.yaml", "cuda134.yaml"]
    assert (variants / "cuda129.yaml").read_text() == before  # 2.14 has no aarch64 build yet
    assert "variants/cuda130.yaml: " in out and "has no pytorch built with CUDA 13.0 on linux-64, linux-aarch64, win-64 " \
        "(dropped: the file is deleted)" in out
    # the recipes render 13.4 on Linux only (causal-conv1d's build.skip: Windows is 13.0's), where 2.14 is x86's alone
    assert "variants/cuda134.yaml: new, CUDA 13.4 with pytorch 2.10, 2.11, 2.12, 2.13 (built on linux-64, linux-aarch64)" in out
    assert "CUDA 12.6: only pytorch older than 2.10 (not added)" in out
    assert "CUDA 12.8: no pytorch built with it on linux-64, linux-aarch64, where the recipes render it (not added)" in out
    assert "CUDA lines: added 13.4 (variants/cuda134.yaml); dropped 13.0 (variants/cuda130.yaml)" in out
    assert "rewrote 0 file(s), added 1, deleted 1" in out

    text = (variants / "cuda134.yaml").read_text()
    assert text.startswith("# CUDA 13.4 variants of causal-conv1d and mamba-ssm: one package per pytorch minor x GPU "
                           "generation\n")
    assert "conda-forge-pinning PR #8926" in text and "sm_103 stays out" in text
    for platform, archs in [
        ("linux-64", ["7.5;8.0;8.6;9.0;10.0;11.0;12.0+PTX", "8.0;8.6+PTX", "9.0+PTX", "10.0+PTX", "12.0+PTX"]),
        ("linux-aarch64", ["7.5;8.0;8.6;8.7;9.0;10.0;11.0;12.0+PTX", "8.0;8.6;8.7+PTX", "9.0+PTX", "10.0+PTX", "12.0+PTX"]),
    ]:
        vfile = read_variant_file(variants / "cuda134.yaml", platform)  # as rattler-build reads it
        data = {k: [str(v) for v in vs] for k, vs in vfile.data.items() if k != "zip_keys"}
        assert data == {
            "cuda_compiler": ["cuda-nvcc"], "cuda_compiler_version": ["13.4"],
            "c_compiler": ["gcc"], "c_compiler_version": ["15"], "cxx_compiler": ["gxx"], "cxx_compiler_version": ["15"],
            "c_stdlib": ["sysroot"], "c_stdlib_version": ["2.28"],
            "python": cuda130.pythons, "pytorch": ["2.10", "2.11", "2.12", "2.13"],
            "gpu_generation": ["all", "sm8x", "sm90", "sm10x", "sm12x"], "cuda_arch_list": archs,
            "cuda_arch_supported": ["7.5;8.0;8.6;8.7;8.8;8.9;9.0;10.0;11.0;12.0;12.1"], "nvcc_lineinfo": ["0"]}
        assert vfile.data["zip_keys"] == cuda130.data["zip_keys"]
    planned = plan(Selection(cuda="13.4"), files=[read_variant_file(variants / "cuda134.yaml", "linux-64")],
                   target_platform="linux-64")
    assert len(planned) == 2 * 1 * 4 * 5  # both packages x Python (3.10, abi3) x minors x generations
    assert {v.package for v in planned} == {"causal-conv1d", "mamba-ssm"}
    assert planned[0].build_string.startswith("cuda134_cp310abi3_torch210_all_h")
    assert {v.archs for v in planned if v.generation == "sm8x"} == {"8.0;8.6+PTX"}


def test_dry_run_shows_the_new_file_and_writes_nothing(after_cuda134, capsys):
    channel, variants = after_cuda134
    before = {p.name: p.read_text() for p in variants.glob("*.yaml")}
    assert cli.main(["sync-matrix", "--channel", str(channel), "--variants-dir", str(variants), "--dry-run"]) == 0
    assert {p.name: p.read_text() for p in variants.glob("*.yaml")} == before
    out = capsys.readouterr().out
    assert "CUDA lines: added 13.4 (variants/cuda134.yaml); dropped 13.0 (variants/cuda130.yaml)" in out
    assert '--- variants/cuda134.yaml (new)\n# CUDA 13.4 variants' in out and 'cuda_compiler_version:\n  - "13.4"\n' in out
    assert out.rstrip().endswith("dry run: nothing written")


def test_the_table_rebuilds_cuda130_as_written_by_hand(setup, capsys):
    """LINES and GENERATIONS reproduce variants/cuda130.yaml's values on each platform: the rule is the file's."""
    channel, variants = setup
    (variants / "cuda130.yaml").unlink()
    assert cli.main(["sync-matrix", "--channel", str(channel), "--variants-dir", str(variants), "--dry-run"]) == 0
    assert not (variants / "cuda130.yaml").exists()
    assert "CUDA lines: added 13.0 (variants/cuda130.yaml)" in capsys.readouterr().out
    assert cli.main(["sync-matrix", "--channel", str(channel), "--variants-dir", str(variants)]) == 0
    assert "variants/cuda130.yaml: new, CUDA 13.0 with pytorch 2.10, 2.11, 2.12, 2.13" in capsys.readouterr().out
    for platform in ("linux-64", "linux-aarch64", "win-64"):
        assert read_variant_file(variants / "cuda130.yaml", platform).data == \
            read_variant_file(VARIANTS_DIR / "cuda130.yaml", platform).data, platform


def test_a_line_without_its_pinning_is_refused(setup, tmp_path, capsys):
    _, variants = setup
    channel = conda_forge_like(tmp_path / "cuda136", builds_by_version={"2.13.0": ["cuda136_generic_py312_h1_200",
                                                                                    "cuda129_generic_py312_h2_200",
                                                                                    "cuda130_generic_py312_h3_200"]})
    before = {p.name: p.read_text() for p in variants.glob("*.yaml")}
    assert cli.main(["sync-matrix", "--channel", str(channel), "--variants-dir", str(variants), "--oldest", "2.13"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "builds pytorch 2.13 with CUDA 13.6, which sync_matrix.py's LINES does not describe" in err[0]
    assert {p.name: p.read_text() for p in variants.glob("*.yaml")} == before


def test_a_line_left_behind_by_newer_minors_is_kept_with_a_note(setup, capsys):
    """conda-forge keeps a retired line's builds: only a note tells that the newest minor has none of it."""
    channel, variants = setup
    assert cli.main(["sync-matrix", "--channel", str(channel), "--variants-dir", str(variants), "--target-platform",
                     "linux-64", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "variants/cuda129.yaml: note: pytorch 2.15 has CUDA builds on linux-64, none with CUDA 12.9" in out
    assert "CUDA lines" not in out
