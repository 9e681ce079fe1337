"""ssm_conda.doctor.facts: the interpreter probe (real subprocesses of fake environments), env."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from ssm_conda.console import UsageError
from ssm_conda.doctor import facts as doc
from ssm_conda.doctor.facts import InstalledDist, InterpreterInfo, Probes, TorchInfo
from ssm_conda.machine import DriverInfo

from tests.repo import REPO_ROOT
from tests.scripts.doctor.builders import FAKE_TORCH, driver, fake_env, make_facts


def test_probe_reads_torch_and_a_stale_wheel(tmp_path: Path) -> None:
    info = doc.probe_interpreter(str(fake_env(tmp_path, FAKE_TORCH)))
    assert info.version == ".".join(map(str, sys.version_info[:3])) and info.error is None
    assert info.torch is not None
    assert (info.torch.version, info.torch.cuda, info.torch.cxx11_abi) == ("2.13.0+cu130", "13.0", True)
    assert info.torch.dist is not None and info.torch.dist.installer == "pip"
    assert info.causal_conv1d is not None and info.causal_conv1d.wheel_tag == {
        "cuda_major": "12", "torch": "2.6", "cxx11_abi": True,
    }
    assert list(info.extensions) == ["causal_conv1d_cuda"] and "undefined symbol" in (info.extensions["causal_conv1d_cuda"] or "")


def test_probe_imports_every_extension_of_every_package(tmp_path: Path) -> None:
    """causal_conv1d_cuda and selective_scan_cuda (ssm_conda.project): each one found is imported, and a crash names it."""
    wrapper = fake_env(tmp_path, FAKE_TORCH)
    (tmp_path / "site" / "selective_scan_cuda.py").write_text("")
    info = doc.probe_interpreter(str(wrapper))
    assert info.extensions["selective_scan_cuda"] is None and "undefined symbol" in (info.extensions["causal_conv1d_cuda"] or "")
    (tmp_path / "site" / "selective_scan_cuda.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    info = doc.probe_interpreter(str(wrapper))
    assert info.extensions["selective_scan_cuda"] == "`import selective_scan_cuda` crashed the interpreter (signal 11)"
    assert "undefined symbol" in (info.extensions["causal_conv1d_cuda"] or "")  # what came before the crash stays


def test_probe_survives_a_segfaulting_torch(tmp_path: Path) -> None:
    info = doc.probe_interpreter(str(fake_env(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")))
    assert info.version == ".".join(map(str, sys.version_info[:3]))
    assert info.torch is not None and "crashed" in (info.torch.import_error or "")


def test_no_import_reads_metadata_only(tmp_path: Path) -> None:
    wrapper = fake_env(tmp_path, "raise SystemExit('torch must not be imported')\n")
    info = doc.probe_interpreter(str(wrapper), import_torch=False)
    assert info.torch is not None and info.torch.version == "2.13.0+cu130" and info.torch.import_error is None


def test_probe_of_something_that_is_not_python(tmp_path: Path) -> None:
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\necho 'not a python' >&2\nexit 3\n")
    script.chmod(0o755)
    info = doc.probe_interpreter(str(script))
    assert info.error == f"could not run {script}: not a python" and info.torch is None


def test_probe_output_survives_a_crashing_torch() -> None:
    stdout = (
        '@@doctor {"stage": "python", "version": "3.12.8", "executable": "/e/bin/python", "prefix": "/e"}\n'
        '@@doctor {"stage": "dists", "torch": {"version": "2.13.0", "installer": "conda", "url": null},'
        ' "causal_conv1d": null, "mamba_ssm": {"version": "2.3.2.post1+cu13torch2.11cxx11abiTRUE", "installer": "pip",'
        ' "url": null}}\n'
    )
    info = doc.parse_probe_output("/e/bin/python", stdout, -11)
    assert info.version == "3.12.8" and info.torch is not None
    assert "signal 11" in (info.torch.import_error or "")
    assert info.torch.dist is not None and info.torch.dist.installer == "conda"
    assert info.mamba_ssm is not None and info.mamba_ssm.torch_minor == "2.11" and not info.mamba_ssm.from_conda


def test_env_detection() -> None:
    pixi = doc.detect_env(
        {"PIXI_PROJECT_ROOT": "/p", "PIXI_ENVIRONMENT_NAME": "cuda", "CONDA_PREFIX": "/p/.pixi/envs/cuda"}, None
    )
    assert (pixi.kind, pixi.name, pixi.prefix, pixi.this_project) == ("pixi", "cuda", "/p/.pixi/envs/cuda", False)
    conda = doc.detect_env({"CONDA_PREFIX": "/opt/conda/envs/ml", "CONDA_DEFAULT_ENV": "ml"}, None)
    assert (conda.kind, conda.name) == ("conda", "ml")
    assert doc.detect_env({}, None).kind is None
    assert doc.detect_env({"VIRTUAL_ENV": "/v/.venv"}, None).kind == "venv"
    own = doc.detect_env({"PIXI_PROJECT_ROOT": str(REPO_ROOT), "PIXI_ENVIRONMENT_NAME": "default"}, None)
    assert own.kind == "pixi" and own.this_project


def test_active_conda_env_that_is_not_the_interpreters(tmp_path: Path) -> None:
    assert doc.detect_env({"CONDA_PREFIX": "/opt/conda"}, str(tmp_path)).kind is None
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert doc.detect_env({"CONDA_PREFIX": "/opt/conda"}, str(tmp_path)).kind == "venv"


def test_conda_meta_marks_conda_installs(tmp_path: Path) -> None:
    meta = tmp_path / "conda-meta"
    meta.mkdir()
    (meta / "pytorch-2.13.0-cuda130_generic_py312_h5a1b2c3_200.json").write_text("{}")
    (meta / "causal-conv1d-1.7.0-cuda130_cp310abi3_torch213_h0123abc_0.json").write_text("{}")
    (meta / "mamba-ssm-2.3.2.post1-cuda130_cp310abi3_torch213_h0123abc_0.json").write_text("{}")
    assert doc.conda_records(str(tmp_path))["causal-conv1d"] == ("1.7.0", "cuda130_cp310abi3_torch213_h0123abc_0")
    probes = Probes(
        driver=lambda: driver(),
        interpreter=lambda exe, _imp: InterpreterInfo(
            exe, "3.12.8", str(tmp_path), torch=TorchInfo("2.13.0", "13.0", True, InstalledDist("2.13.0", "pip"))
        ),
        environ={"CONDA_PREFIX": str(tmp_path), "CONDA_OVERRIDE_CUDA": "12.9"},
    )
    facts = doc.gather_facts("/x/python", probes)
    assert facts.interpreter.torch is not None and facts.interpreter.torch.dist is not None
    assert facts.interpreter.torch.dist.conda_build == "cuda130_generic_py312_h5a1b2c3_200"
    assert facts.interpreter.torch.dist.from_conda  # conda-meta wins over the INSTALLER file
    assert facts.interpreter.causal_conv1d is not None
    assert facts.interpreter.causal_conv1d.conda_build == "cuda130_cp310abi3_torch213_h0123abc_0"
    mamba = facts.interpreter.mamba_ssm
    assert mamba is not None and (mamba.version, mamba.from_conda, mamba.torch_minor) == ("2.3.2.post1", True, "2.13")
    assert facts.env.kind == "conda" and facts.conda_override_cuda == "12.9"


def test_facts_driver_cuda_falls_back_to_the_override() -> None:
    assert make_facts(override="12.9").driver_cuda == "13.0"  # the driver's own, when there is one
    assert make_facts(drv=DriverInfo(), override="12.9").driver_cuda == "12.9"
    assert make_facts(drv=DriverInfo()).driver_cuda is None


@pytest.mark.parametrize("value", ["garbage", "13", "12.9.1", "", "cuda12.9", "12.9 "])
def test_the_cuda_override_is_a_version_or_empty(value: str) -> None:
    """conda reads CONDA_OVERRIDE_CUDA as a version (empty: no CUDA); anything else is bad input, not a driver to update."""
    probes = Probes(driver=DriverInfo, interpreter=lambda exe, _imp: InterpreterInfo(exe), conda_records=lambda _p: {},
                    conda=lambda _e: None, environ={"CONDA_OVERRIDE_CUDA": value})
    if value in ("13", "12.9.1", ""):
        assert doc.gather_facts("/x/python", probes).conda_override_cuda == (value or None)
    else:
        with pytest.raises(UsageError, match=rf"^CONDA_OVERRIDE_CUDA={re.escape(value)} is not a CUDA version; accepted: "):
            doc.gather_facts("/x/python", probes)
