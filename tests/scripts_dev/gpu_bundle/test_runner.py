"""The bundle's runner, as a GPU node runs it (`python3 check.pyz`), here without a GPU: a CPU-only torch in a fresh
venv is refused before anything runs, so is another torch minor or Python; and (slow) the CPU dry run of the
packages' tests against the stand-in extensions runs every test and fails on each planted bug."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from ssm_conda_dev import cli
from ssm_conda_dev.gpu_bundle import command

from tests.bad_input import read_only
from tests.cached_venv import cached_venv
from tests.recipe.causal_conv1d.test_kernels_dry_run import PLANTED as CONV_PLANTED
from tests.recipe.mamba_ssm.test_kernels_dry_run import PLANTED as SCAN_PLANTED
from tests.recipe.planted_runs import read_outcomes
from tests.scripts_dev.gpu_bundle.conftest import PYTHON, TORCH, fake_package, variants


def bundle_of(channel: Path, out: Path, python: str = PYTHON, torch: str = TORCH) -> Path:
    assert cli.main(["gpu-bundle", "--output-dir", str(channel), "--python", python, "--torch", torch,
                     "--bundle", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def bundle(fake_channel, tmp_path_factory) -> Path:
    return bundle_of(fake_channel, tmp_path_factory.mktemp("bundle") / "check.pyz")


@pytest.fixture(scope="module")
def cpu_torch() -> Path:
    """A fresh venv with only the CPU torch the test requirements pin and numpy (cached): a node's Python, less its GPU
    and what the tests import (torch warns on stderr where numpy is missing)."""
    version = importlib.metadata.version("torch").split("+")[0]
    return cached_venv("torch-only", [f"torch=={version}", "numpy"]) / "bin" / "python"


def run(python: Path | str, bundle: Path, cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), str(bundle), *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=1800)


def refused(result: subprocess.CompletedProcess, status: int, start: str, cwd: Path) -> None:
    """One line on stderr, the status, nothing on stdout, no results folder: nothing ran."""
    assert (result.returncode, result.stdout) == (status, ""), result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {start}"), result.stderr
    assert not (cwd / "gpu-check-results").exists()


def test_a_cpu_only_torch_is_refused_before_anything_runs(bundle, cpu_torch, tmp_path):
    refused(run(cpu_torch, bundle, tmp_path), 4, f"no usable GPU: torch {TORCH}.", tmp_path)


OTHER_TORCH = "2.12" if TORCH != "2.12" else "2.13"
RUNNING, LATER = f"{sys.version_info.major}.{sys.version_info.minor}", f"{sys.version_info.major}.{sys.version_info.minor + 1}"


@pytest.mark.parametrize(("torch", "python", "why"), [
    (OTHER_TORCH, PYTHON, f"these packages were built against torch {OTHER_TORCH} (CUDA 13.0); this Python has torch {TORCH}"),
    (TORCH, LATER, f"these packages are for Python {LATER} and later, this is Python {RUNNING}"),
], ids=["another torch minor", "a later Python"])
def test_a_bundle_for_another_torch_or_python_is_refused(cpu_mamba_ssm, tmp_path, torch, python, why):
    channel = tmp_path / "output"
    for variant in variants(torch=torch, python=python):
        fake_package(channel, variant, cpu_mamba_ssm)
    refused(run(sys.executable, bundle_of(channel, tmp_path / "other.pyz", python, torch), tmp_path), 3, why, tmp_path)


def test_not_a_bundle_and_bad_usage_are_one_line(bundle, tmp_path):
    junk = tmp_path / "junk.pyz"
    with zipfile.ZipFile(junk, "w") as archive:  # the runner, without the manifest that says what to test
        archive.writestr("__main__.py", command.RUNNER.read_text())
    refused(run(sys.executable, junk, tmp_path), 2, f"{junk}: not a GPU-check bundle", tmp_path)
    refused(run(sys.executable, bundle, tmp_path, "a", "b"), 2, "usage: python3 BUNDLE.pyz [RESULTS_DIR]", tmp_path)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "earlier.txt").write_text("")
    refused(run(sys.executable, bundle, tmp_path, "full", env={"CAUSAL_CONV1D_TEST_DEVICE": "cpu", "PATH": "/usr/bin"}),
            2, f"{tmp_path / 'full'} is not an empty folder", tmp_path)
    refused(run(sys.executable, bundle, tmp_path, "full/earlier.txt", env={"CAUSAL_CONV1D_TEST_DEVICE": "cpu"}),
            2, f"{tmp_path / 'full' / 'earlier.txt'} is not an empty folder", tmp_path)
    with read_only(tmp_path / "full"):
        refused(run(sys.executable, bundle, tmp_path, "full/new", env={"CAUSAL_CONV1D_TEST_DEVICE": "cpu"}),
                2, f"{tmp_path / 'full' / 'new'}: cannot make the results folder", tmp_path)


@pytest.mark.slow
def test_the_cpu_dry_run_runs_every_test_and_fails_on_each_planted_bug(bundle, tmp_path):
    """<PREFIX>_TEST_DEVICE=cpu: the bundle's own tests on the CPU stand-ins its fake packages carry, every planted
    bug of tests/recipe/*/test_kernels_dry_run.py at once (planted_bugs.py parametrizes the kernel tests). Against
    the correct stand-ins every kernel test passes; each bug fails some. What a CPU dry run cannot pass fails too,
    and says so: the arch checks (no compiled extension to read), upstream's tests (they make CUDA tensors) and
    transformers' path (it hands the kernels only CUDA tensors). About 100 s."""
    env = {**os.environ, "CAUSAL_CONV1D_TEST_DEVICE": "cpu", "MAMBA_SSM_TEST_DEVICE": "cpu",
           "PYTEST_ADDOPTS": "-p planted_bugs", "CAUSAL_CONV1D_CPU_KERNEL_BUGS": ",".join(["none", *CONV_PLANTED]),
           "MAMBA_SSM_CPU_KERNEL_BUGS": ",".join(["none", *SCAN_PLANTED])}
    result = run(sys.executable, bundle, tmp_path, "results", env=env)
    results = tmp_path / "results"
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].endswith("NOT every test ran and passed")
    for package, planted in (("causal-conv1d", CONV_PLANTED), ("mamba-ssm", SCAN_PLANTED)):
        by_bug = read_outcomes(results / f"{package}-junit.xml", lambda case: "test_kernels" in case.get("classname"))
        assert set(by_bug) == {"none", *planted}, package
        correct = set(by_bug["none"].values())  # mamba-ssm's Triton tests skip: their kernels need a GPU
        assert "passed" in correct and not {"failed", "error"} & correct, (package, by_bug["none"])
        for bug in planted:
            assert "failed" in by_bug[bug].values(), (package, bug)
        log = (results / f"{package}-tests.log").read_text()
        assert "FatbinError: the extension module" in log  # the arch checks: no compiled extension here
    for name in ("summary.json", "summary.txt", "gpu.txt", "causal-conv1d-tests.log", "mamba-ssm-tests.log"):
        assert (results / name).is_file(), name
