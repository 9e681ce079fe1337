"""ssm-conda-dev gpu-bundle: one file under 48 MiB from a variant's packages (their site-packages and test files, their
test sections, the benchmark, the runner); the wrong package or a bundle too big is one line and no file."""

from __future__ import annotations

import json
import os
import shutil
import zipfile

from ssm_conda_dev import cli
from ssm_conda_dev.gpu_bundle import command

from tests.damaged_archives import build_package
from tests.scripts_dev.gpu_bundle.conftest import PYTHON, TORCH, variants


def make(channel, tmp_path, *extra: str) -> int:
    return cli.main(["gpu-bundle", "--output-dir", str(channel), "--python", PYTHON, "--torch", TORCH,
                     "--bundle", str(tmp_path / "check.pyz"), *extra])


def test_the_bundle_holds_both_packages_their_tests_the_benchmark_and_the_runner(fake_channel, tmp_path, capsys):
    assert make(fake_channel, tmp_path) == 0
    out = capsys.readouterr().out
    assert f"on the GPU node: python3 check.pyz   (Python {PYTHON}+, torch {TORCH}" in out
    bundle = tmp_path / "check.pyz"
    assert bundle.stat().st_size < command.LIMIT
    with zipfile.ZipFile(bundle) as archive:
        names = set(archive.namelist())
        manifest = json.loads(archive.read("manifest.json"))
        assert archive.read("__main__.py") == command.RUNNER.read_bytes()
        assert archive.getinfo("__main__.py").compress_type == zipfile.ZIP_DEFLATED  # zipimport reads no LZMA
    assert manifest["variant"] == {"label": f"cuda13.0-py{PYTHON}-torch{TORCH}-sm90", "cuda": "13.0", "python": PYTHON,
                                   "torch": TORCH, "generation": "sm90", "archs": ["9.0"], "cuda_arch": ">=9.0,<10"}
    assert [(p["name"], p["build"]) for p in manifest["packages"]] == [(v.package, v.build_string) for v in variants()]
    scripts = [t["script"] for p in manifest["packages"] for t in p["tests"] if "script" in t]
    assert [s["env"] for s in scripts] == [
        {"CAUSAL_CONV1D_EXPECTED_ARCHS": "9.0+PTX", "SSM_CONDA_EXPECTED_LINEINFO": "0"},
        {"MAMBA_SSM_EXPECTED_ARCHS": "9.0+PTX", "SSM_CONDA_EXPECTED_LINEINFO": "0"}]
    site = "prefix/site-packages"
    assert {f"{site}/causal_conv1d/__init__.py", f"{site}/causal_conv1d_cuda.py", f"{site}/mamba_ssm/__init__.py",
            "prefix/etc/conda/test-files/causal-conv1d/2/tests/test_kernels.py",
            "prefix/etc/conda/test-files/causal-conv1d/2/shared/tests/gpu_gate.py",
            "prefix/etc/conda/test-files/mamba-ssm/2/tests/test_transformers.py",
            "lib/ssm_conda_dev/benchmarks/kernels.py", "lib/ssm_conda/console.py", "lib/rich/__init__.py"} <= names
    assert not [n for n in names if n.startswith("prefix/") and not n.startswith(("prefix/site-packages/", "prefix/etc/conda/"))]
    assert not [n for n in names if "__pycache__" in n]


def test_only_the_variants_packages_go_in_and_the_newest_of_two_builds(fake_channel, tmp_path):
    """Another variant's packages beside them stay out; of two builds of the variant, the newer file is taken."""
    channel = tmp_path / "output"
    shutil.copytree(fake_channel, channel)
    other = variants(python="3.12" if PYTHON != "3.12" else "3.13")
    for variant in other:
        build_package(channel / "linux-64", variant.package, str(variant.rendered.recipe.package.version),
                      variant.build_string)
    first, mamba = (next(channel.glob(f"linux-64/{v.package}-*-{v.build_string}.conda")) for v in variants())
    newer = first.with_name(first.name.replace("_h", "_hffff", 1))  # another hash: a stand-in's compilers, say
    shutil.copy(first, newer)
    os.utime(newer, (first.stat().st_mtime + 60,) * 2)
    assert make(channel, tmp_path) == 0
    with zipfile.ZipFile(tmp_path / "check.pyz") as archive:
        manifest = json.loads(archive.read("manifest.json"))
    assert [p["file"] for p in manifest["packages"]] == [newer.name, mamba.name]


def test_a_bundle_over_the_limit_is_refused_and_nothing_is_left(fake_channel, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(command, "LIMIT", 100_000)
    assert make(fake_channel, tmp_path) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: the bundle would be ") and "over the 100.0 KB" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_variant_the_channel_does_not_hold_is_one_line_saying_how_to_build_it(fake_channel, tmp_path, capsys):
    assert cli.main(["gpu-bundle", "--output-dir", str(fake_channel), "--python", "3.99", "--torch", TORCH,
                     "--bundle", str(tmp_path / "check.pyz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: no causal-conv1d package of cuda13.0-py3.99-torch{TORCH}-sm90 in {fake_channel}: build it with "
                   f"ssm-conda build --cuda 13.0 --python 3.99 --torch {TORCH} --generation sm90"]
    assert not (tmp_path / "check.pyz").exists()
