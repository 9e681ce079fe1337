"""ssm_conda.doctor.rules: each rule alone, with the least facts that make it speak (and stay quiet)."""

from __future__ import annotations

import inspect

import pytest
from ssm_conda.doctor import rules
from ssm_conda.doctor.facts import EnvInfo, InstalledDist, TorchInfo
from ssm_conda.doctor.rules import Finding, Target
from ssm_conda.machine import DriverInfo

from tests.scripts.doctor.builders import (
    B300,
    CUDA129,
    CUDA130,
    FILES,
    GB10,
    H100,
    conda_torch,
    driver,
    make_facts,
    pip_torch,
    variant,
)

UPSTREAM_WHEEL_URL = (
    "https://github.com/Dao-AILab/causal-conv1d/releases/download/v1.5.0.post8/"
    "causal_conv1d-1.5.0.post8+cu12torch2.6cxx11abiFALSE-cp312-cp312-linux_x86_64.whl"
)


def codes(findings: list[Finding]) -> list[str]:
    return [f.code for f in findings]


def target(vfile=CUDA130, python: str = "3.12", torch: str = "2.13") -> Target:
    return Target(vfile, python, torch)


def test_every_rule_is_registered_once() -> None:
    defined = {
        fn for name, fn in vars(rules).items()
        if inspect.isfunction(fn) and not name.startswith("_") and fn.__module__ == rules.__name__
        and list(inspect.signature(fn).parameters)[:1] == ["facts"]
    }
    registered = [*rules.MACHINE_RULES, *rules.TARGET_RULES]
    assert len(registered) == len(set(registered))
    assert defined == set(registered)


# --- machine rules ----------------------------------------------------------------------------


def test_probe_failed() -> None:
    facts = make_facts()
    assert rules.probe_failed(facts, FILES) == []
    facts.interpreter.error = "could not run /x/python: No such file"
    [finding] = rules.probe_failed(facts, FILES)
    assert (finding.level, finding.message) == ("missing", "could not run /x/python: No such file")


def test_driver_missing() -> None:
    assert rules.driver_missing(make_facts(), FILES) == []
    [finding] = rules.driver_missing(make_facts(drv=DriverInfo()), FILES)
    assert finding.level == "missing" and "nvidia-smi not found and py-rattler detects no __cuda" in finding.message
    failing = DriverInfo(errors=["nvidia-smi failed: couldn't communicate with the NVIDIA driver"])
    found = rules.driver_missing(make_facts(drv=failing), FILES)
    assert [f.level for f in found] == ["missing", "note"] and "couldn't communicate" in found[0].message
    assert codes(rules.driver_missing(make_facts(drv=driver(gpus=[])), FILES)) == ["gpu"]


def test_torch_unusable() -> None:
    assert rules.torch_unusable(make_facts(torch=conda_torch()), FILES) == []
    assert codes(rules.torch_unusable(make_facts(), FILES)) == ["torch"]
    broken = TorchInfo("2.13.0", import_error="ImportError: libcudnn.so.9")
    assert codes(rules.torch_unusable(make_facts(torch=broken), FILES)) == ["torch-import-failed"]
    assert codes(rules.torch_unusable(make_facts(torch=conda_torch(cuda=None)), FILES)) == ["torch-cpu-only"]


def test_own_project_env() -> None:
    assert rules.own_project_env(make_facts(), FILES) == []
    [finding] = rules.own_project_env(make_facts(env=EnvInfo("pixi", "default", this_project=True)), FILES)
    assert finding.level == "note" and "--interpreter" in finding.message


def test_no_variant_files() -> None:
    assert rules.no_variant_files(make_facts(), FILES) == []
    assert codes(rules.no_variant_files(make_facts(), [])) == ["variants"]


def test_torch_cuda_not_packaged() -> None:
    assert rules.torch_cuda_not_packaged(make_facts(torch=conda_torch(cuda="12.8")), FILES) == []
    [finding] = rules.torch_cuda_not_packaged(make_facts(torch=pip_torch("2.6.0+cu118", "11.8")), FILES)
    assert finding.code == "no-package-for-torch-cuda"
    assert "CUDA 12.9, 13.0" in finding.message and "pytorch=*=cuda130*" in finding.message
    assert rules.torch_cuda_not_packaged(make_facts(torch=pip_torch("2.6.0+cu118", "11.8")), []) == []


def test_installed_package() -> None:
    def run(wheel: InstalledDist, **kw) -> list[Finding]:
        return rules.installed_package(make_facts(torch=conda_torch(), wheel=wheel, **kw), FILES)

    assert rules.installed_package(make_facts(), FILES) == []
    [conda] = run(InstalledDist("1.7.0", "conda", conda_build="cuda130_cp310abi3_torch213_h1234567_0"))
    assert conda.level == "note" and "cuda130_cp310abi3_torch213_h1234567_0" in conda.message
    [mismatch] = run(InstalledDist("1.5.0.post8", "pip", url=UPSTREAM_WHEEL_URL))
    assert mismatch.code == "pip-wheel-mismatch"
    assert all(p in mismatch.message for p in ("torch 2.6 (here 2.13)", "CUDA 12 (here 13)", "cxx11abi"))
    assert run(InstalledDist("1.5.0.post8+cu13torch2.13cxx11abiTRUE", "pip")) == []  # the wheel fits
    assert codes(run(InstalledDist("1.7.0", "uv"))) == ["installed-by-pip"]
    assert run(InstalledDist("1.7.0", "uv"), env=EnvInfo("venv", "v", "/v")) == []


def test_extension_import_failed() -> None:
    assert rules.extension_import_failed(make_facts(torch=conda_torch()), FILES) == []
    symbol = "ImportError: causal_conv1d_cuda.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"
    [finding] = rules.extension_import_failed(make_facts(torch=conda_torch(), extension_error=symbol), FILES)
    assert finding.code == "extension-undefined-symbol" and "2.13.0 here" in finding.message
    other = rules.extension_import_failed(make_facts(torch=conda_torch(), extension_error="OSError: libc10.so"), FILES)
    assert codes(other) == ["extension-import-failed"] and "libc10.so" in other[0].message
    both = make_facts(torch=conda_torch(), extensions={"causal_conv1d_cuda": None, "selective_scan_cuda": symbol})
    [finding] = rules.extension_import_failed(both, FILES)
    assert finding.code == "extension-undefined-symbol"
    assert finding.message.startswith("`import selective_scan_cuda` fails: ")
    assert "the installed mamba-ssm was built" in finding.message


CONDA_CC = InstalledDist("1.7.0", "conda", conda_build="cuda130_cp310abi3_torch213_h0_0")
CONDA_MAMBA = InstalledDist("2.3.2.post1", "conda", conda_build="cuda130_cp310abi3_torch213_h0_0")


def test_ssm_version_mismatch() -> None:
    def run(mamba: str, conv: str) -> list[Finding]:
        facts = make_facts(mamba=InstalledDist(mamba, "pip"), wheel=InstalledDist(conv, "pip"))
        return rules.ssm_pair(facts, FILES)

    [old_conv] = run("2.3.2.post1", "1.5.0.post8+cu12torch2.6cxx11abiTRUE")
    assert old_conv.code == "causal-conv1d-too-old" and "cpp_functions" in old_conv.message
    assert "incompatible function arguments" in old_conv.message and "mamba #436" in old_conv.message
    [old_mamba] = run("2.2.4", "1.7.0")
    assert old_mamba.code == "mamba-ssm-too-old" and "incompatible function arguments" in old_mamba.message
    assert run("2.3.2.post1", "1.7.0") == [] and run("2.2.4", "1.5.0") == []
    assert rules.ssm_pair(make_facts(wheel=InstalledDist("1.5.0", "pip")), FILES) == []  # no mamba-ssm


def test_mamba_without_causal_conv1d() -> None:
    [finding] = rules.ssm_pair(make_facts(mamba=CONDA_MAMBA), FILES)
    assert finding.level == "note" and "nn.Conv1d" in finding.message and "Mamba2" in finding.message
    assert rules.ssm_pair(make_facts(mamba=CONDA_MAMBA, wheel=CONDA_CC), FILES) == []
    assert rules.ssm_pair(make_facts(wheel=CONDA_CC), FILES) == []


# --- target rules -----------------------------------------------------------------------------


def test_driver_too_old() -> None:
    assert rules.driver_too_old(make_facts(), target()) == []
    [old] = rules.driver_too_old(make_facts(drv=driver(cuda="12.4")), target())
    assert old.code == "driver-too-old" and ">= 580.65.06" in old.message
    assert rules.driver_too_old(make_facts(drv=driver(cuda="12.8")), target(CUDA129)) == []  # minor-version compatible
    # No driver: CONDA_OVERRIDE_CUDA stands in for it, as in a solve
    assert codes(rules.driver_too_old(make_facts(drv=DriverInfo(), override="12.9"), target())) == ["driver-too-old"]
    assert rules.driver_too_old(make_facts(drv=DriverInfo()), target()) == []


def test_python_not_packaged() -> None:
    """One package serves the variant file's Python and every later one (3.14, and 3.15 before the file knows it)."""
    for python in ("3.10.4", "3.12.8", "3.14.0", "3.15.0"):
        assert rules.minor_not_packaged(make_facts(python=python), target()) == [], python
    [finding] = rules.minor_not_packaged(make_facts(python="3.9.18"), target())
    assert finding.unpackaged and "no package for Python 3.9 (packaged: 3.10 and later)" in finding.message


def test_torch_not_packaged() -> None:
    assert rules.minor_not_packaged(make_facts(torch=conda_torch("2.13.0")), target()) == []
    assert rules.minor_not_packaged(make_facts(), target()) == []  # no torch: the package brings one
    [finding] = rules.minor_not_packaged(make_facts(torch=conda_torch("2.11.0")), target())
    assert finding.unpackaged and "torch 2.11 with CUDA 13.0" in finding.message


def test_pip_torch_in_conda_env() -> None:
    assert codes(rules.pip_torch_in_conda_env(make_facts(torch=pip_torch()), target())) == ["pip-torch-in-conda-env"]
    assert rules.pip_torch_in_conda_env(make_facts(torch=pip_torch(), env=EnvInfo(None)), target()) == []
    assert rules.pip_torch_in_conda_env(make_facts(torch=conda_torch()), target()) == []


def test_gpu_not_covered() -> None:
    assert rules.gpu_not_covered(make_facts(drv=driver(gpus=[H100])), target()) == []
    lacking = variant(gpu_generation=["all"], cuda_arch_list=["7.5;8.0;9.0;10.0"])  # no 12.x, no PTX
    [finding] = rules.gpu_not_covered(make_facts(drv=driver(gpus=[GB10])), target(lacking))
    assert finding.code == "arch-not-packaged" and finding.unpackaged
    assert "newer than every" in finding.message and "sm_121" in finding.message
    with_ptx = variant(gpu_generation=["all"], cuda_arch_list=["8.0;9.0+PTX"])
    [ptx] = rules.gpu_not_covered(make_facts(drv=driver(gpus=[GB10])), target(with_ptx))
    assert ptx.level == "note" and "compute_90 PTX" in ptx.message


def test_sm103_nvcc13() -> None:
    [finding] = rules.sm103_nvcc13(make_facts(drv=driver(gpus=[B300])), target(CUDA130))
    assert finding.code == "sm103-nvcc13" and "#105" in finding.message and "CUDA 13.0" in finding.message
    assert rules.sm103_nvcc13(make_facts(drv=driver(gpus=[B300])), target(CUDA129)) == []
    assert rules.sm103_nvcc13(make_facts(drv=driver(gpus=[H100])), target()) == []


@pytest.mark.parametrize(
    ("wheel", "warned"),
    [
        (InstalledDist("1.7.0", "pip"), True),  # built here from source: maybe with nvcc 13
        (InstalledDist("1.5.0.post8+cu12torch2.13cxx11abiTRUE", "pip"), False),  # upstream's CUDA 12 wheel
        (InstalledDist("1.7.0", "conda", conda_build="cuda130_cp310abi3_torch213_h0_0"), False),
    ],
)
def test_sm103_pip_build(wheel: InstalledDist, warned: bool) -> None:
    facts = make_facts(drv=driver(gpus=[B300]), wheel=wheel)
    assert codes(rules.sm103_pip_build(facts, target())) == (["sm103-pip-build"] if warned else [])
    assert rules.sm103_pip_build(make_facts(drv=driver(gpus=[H100]), wheel=wheel), target()) == []


def test_ssm_torch_mismatch() -> None:
    def run(mamba: InstalledDist, conv: InstalledDist | None = CONDA_CC, torch: str = "2.13.0") -> list[Finding]:
        return rules.ssm_torch_mismatch(make_facts(torch=conda_torch(torch), mamba=mamba, wheel=conv), target())

    assert run(CONDA_MAMBA) == []
    assert run(InstalledDist("2.3.2.post1", "conda", conda_build="cuda130py312h0_0")) == []  # conda-forge: no torch
    assert rules.ssm_torch_mismatch(make_facts(torch=conda_torch(), wheel=CONDA_CC), target()) == []  # no mamba-ssm
    [pair] = run(InstalledDist("2.3.2.post1+cu13torch2.11cxx11abiTRUE", "pip"))
    assert pair.code == "ssm-torch-mismatch"
    assert "mamba-ssm 2.3.2.post1+cu13torch2.11cxx11abiTRUE for torch 2.11 (pip)" in pair.message
    assert "causal-conv1d 1.7.0 for torch 2.13 (cuda130_cp310abi3_torch213_h0_0)" in pair.message
    assert "pip uninstall -y mamba-ssm`, then `conda install -c " in pair.message
    assert '"mamba-ssm=*=cuda130_cp310abi3_torch213_*" "causal-conv1d=*=cuda130_cp310abi3_torch213_*"' in pair.message
    [other_torch] = run(CONDA_MAMBA, None, torch="2.12.0")  # both agree, but not with the torch here
    assert "torch here is 2.12" in other_torch.message and "pip uninstall" not in other_torch.message
