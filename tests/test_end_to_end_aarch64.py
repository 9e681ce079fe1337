"""linux-aarch64, end to end (run with --slow): causal-conv1d cross-compiled on linux-64 as
conda-forge builds it (rattler-build with the target platform linux-aarch64, the cross compilers,
cross nvcc and cross-python in the build environment, the aarch64 python, pytorch and sbsa CUDA
packages in the host one, all from the stand-in channel), for the sm90 generation (GH200) and
Debian's aarch64 CPython 3.11; then installed into a linux-aarch64 prefix with py-rattler and run
under user-mode emulation (qemu-aarch64), without a GPU. The extension is AArch64 code with sm_90
SASS alone, and nothing of the build machine is in the package.

mamba-ssm the same way, with Mamba and Mamba2 constructed under emulation, runs with
--slow --aarch64-mamba: its 10 CUDA sources take about 13 minutes more, which CI's time does not
hold beside the rest."""

import json
import subprocess
from pathlib import Path

import pytest
from ssm_conda.paths import cache_dir
from ssm_conda_dev.solving import install_into_prefix
from ssm_conda_dev.standin import debian

from tests.standin_channel import CUDA, GPU, TORCH
from tests.test_end_to_end import assert_sm90_extension_and_nothing_leaked, build_variant, unpack

TARGET, PYTHON_AARCH64 = "linux-aarch64", "3.11"  # the stand-in's aarch64 CPython is Debian's 3.11
EM_AARCH64 = 183  # ELF e_machine (elf.h)


@pytest.fixture(scope="module")
def output(tmp_path_factory) -> tuple[Path, Path]:
    """The output channel and compiler cache of this module's cross builds."""
    return tmp_path_factory.mktemp("aarch64-output"), tmp_path_factory.mktemp("aarch64-ccache")


def check_package(built: tuple[Path, str, float], module: str, output: Path, ccache: Path, tmp_path: Path) -> None:
    package, log, _seconds = built
    assert package.parent.name == TARGET
    unpacked = unpack(package, tmp_path / module)
    index = json.loads((unpacked / "info" / "index.json").read_text())
    assert (index["subdir"], index["arch"]) == (TARGET, "aarch64"), index
    assert "cuda-cudart_linux-aarch64" in index["depends"] and f"__cuda_arch >={GPU},<10" in index["depends"]
    extension = assert_sm90_extension_and_nothing_leaked(unpacked, module, output, ccache)
    assert int.from_bytes(extension.read_bytes()[18:20], "little") == EM_AARCH64
    assert "Overlinking" not in log
    assert "Finished setting up cross-python" in log  # built through crossenv, as conda-forge does


def run_emulated(channels: list[str], spec: str, script: str, tmp_path: Path) -> list[str]:
    """Install `spec` into a linux-aarch64 prefix (an sm90 GPU's machine, as the solver sees it) and
    run `script` with its python under qemu-aarch64; the last line of output, split."""
    prefix, sysroot_env = tmp_path / "env", tmp_path / "sysroot"
    installed = install_into_prefix(channels, [spec], prefix, cuda=CUDA, cuda_arch=GPU, platform=TARGET)
    assert any(r.startswith("causal-conv1d=1.7.0=") for r in installed), installed
    install_into_prefix(channels[1:], ["sysroot_linux-aarch64"], sysroot_env, platform="linux-64")
    qemu = debian.fetch(cache_dir() / "debian", debian.QEMU).root / "qemu-user/usr/bin/qemu-aarch64"
    probe = subprocess.run([str(qemu), "-L", str(sysroot_env / "aarch64-conda-linux-gnu/sysroot"),
                            str(prefix / "bin" / f"python{PYTHON_AARCH64}"), "-c", script], capture_output=True,
                           text=True, timeout=1200, env={"PYTHONNOUSERSITE": "1", "PATH": "/usr/bin:/bin"})
    assert probe.returncode == 0, probe.stderr[-3000:]
    return probe.stdout.strip().splitlines()[-1].split()


@pytest.mark.slow
def test_causal_conv1d_cross_compiled_and_run_under_emulation(standin_aarch64, output, tmp_path):
    built = build_variant(standin_aarch64, output[0], PYTHON_AARCH64, output[1], target_platform=TARGET)
    check_package(built, "causal_conv1d", *output, tmp_path)
    script = ("import platform, torch, causal_conv1d, causal_conv1d_cuda\n"
              "from causal_conv1d.causal_conv1d_interface import causal_conv1d_ref\n"
              "y = causal_conv1d_ref(torch.ones(1, 2, 5), torch.ones(2, 3), activation='silu')\n"
              "print(platform.machine(), torch.__version__, causal_conv1d.__version__, 'x'.join(map(str, y.shape)),\n"
              "      f'{y[0, 0, -1].item():.4f}')")
    machine, torch_version, version, shape, last = run_emulated([output[0].as_uri(), standin_aarch64.as_uri()],
                                                               "causal-conv1d", script, tmp_path)
    # a width-3 window of ones over ones sums to 3 at the end; SiLU(3) = 3 * sigmoid(3)
    assert (machine, version, shape, last) == ("aarch64", "1.7.0", "1x2x5", "2.8577")
    assert torch_version.startswith(TORCH)


@pytest.mark.slow
@pytest.mark.aarch64_mamba
def test_mamba_ssm_cross_compiled_and_constructed_under_emulation(standin_aarch64, output, tmp_path):
    built = build_variant(standin_aarch64, output[0], PYTHON_AARCH64, output[1], "mamba-ssm", target_platform=TARGET)
    check_package(built, "mamba_ssm", *output, tmp_path)
    script = ("import platform, torch, causal_conv1d_cuda, selective_scan_cuda, mamba_ssm, causal_conv1d\n"
              "from mamba_ssm import Mamba, Mamba2\n"
              "Mamba(d_model=16, device='cpu'); Mamba2(d_model=64, device='cpu')\n"
              "print(platform.machine(), torch.__version__, mamba_ssm.__version__, causal_conv1d.__version__)")
    machine, torch_version, mamba, causal = run_emulated([output[0].as_uri(), standin_aarch64.as_uri()],
                                                         "mamba-ssm", script, tmp_path)
    assert (machine, mamba, causal) == ("aarch64", "2.3.2.post1", "1.7.0") and torch_version.startswith(TORCH)
