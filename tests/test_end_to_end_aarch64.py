"""linux-aarch64, end to end (run with --slow): both packages cross-compiled on linux-64 as
conda-forge builds them (rattler-build with the target platform linux-aarch64, the cross compilers,
cross nvcc and cross-python in the build environment, the aarch64 python, pytorch and sbsa CUDA
packages in the host one, all from the stand-in channel), for the sm90 generation (GH200) and
Debian's aarch64 CPython 3.11; then installed into a linux-aarch64 prefix with py-rattler and run
under user-mode emulation (qemu-aarch64): torch and both extensions import and Mamba and Mamba2 are
constructed, without a GPU. The extensions are AArch64 code with sm_90 SASS alone, and nothing of
the build machine is in the packages."""

import json
import subprocess
from pathlib import Path

import pytest
from ssm_conda.dev.solving import install_into_prefix
from ssm_conda.paths import cache_dir
from ssm_conda.standin import debian

from tests.standin_channel import CUDA, GPU, TORCH
from tests.test_end_to_end import assert_sm90_extension_and_nothing_leaked, build_variant, unpack

TARGET, PYTHON_AARCH64 = "linux-aarch64", "3.11"  # the stand-in's aarch64 CPython is Debian's 3.11
EM_AARCH64 = 183  # ELF e_machine (elf.h)
MODULES = {"causal-conv1d": "causal_conv1d_cuda", "mamba-ssm": "selective_scan_cuda"}


@pytest.fixture(scope="module")
def built(standin_aarch64, tmp_path_factory) -> tuple[Path, Path, dict[str, tuple[Path, str, float]]]:
    output, ccache = tmp_path_factory.mktemp("aarch64-output"), tmp_path_factory.mktemp("aarch64-ccache")
    builds = {name: build_variant(standin_aarch64, output, PYTHON_AARCH64, ccache, name, target_platform=TARGET)
              for name in MODULES}
    return output, ccache, builds


@pytest.mark.slow
def test_cross_compiled_packages_are_aarch64_sm90_and_clean(built, tmp_path):
    output, ccache, builds = built
    for name, (package, log, _seconds) in builds.items():
        assert package.parent.name == TARGET
        unpacked = unpack(package, tmp_path / name)
        index = json.loads((unpacked / "info" / "index.json").read_text())
        assert (index["subdir"], index["arch"]) == (TARGET, "aarch64"), index
        assert "cuda-cudart_linux-aarch64" in index["depends"] and f"__cuda_arch >={GPU},<10" in index["depends"]
        extension = assert_sm90_extension_and_nothing_leaked(unpacked, MODULES[name], output, ccache, PYTHON_AARCH64)
        assert int.from_bytes(extension.read_bytes()[18:20], "little") == EM_AARCH64
        assert "Overlinking" not in log
        assert "Finished setting up cross-python" in log  # built through crossenv, as conda-forge does


@pytest.mark.slow
def test_installed_under_emulation_imports_and_constructs(built, standin_aarch64, tmp_path):
    output = built[0]
    prefix, sysroot_env = tmp_path / "env", tmp_path / "sysroot"
    installed = install_into_prefix([output.as_uri(), standin_aarch64.as_uri()], ["mamba-ssm"], prefix, cuda=CUDA,
                                    cuda_arch=GPU, platform=TARGET)
    assert any(r.startswith("causal-conv1d=1.7.0=") for r in installed), installed
    install_into_prefix([standin_aarch64.as_uri()], ["sysroot_linux-aarch64"], sysroot_env, platform="linux-64")
    qemu = debian.fetch(cache_dir() / "debian", debian.QEMU).root / "qemu-user/usr/bin/qemu-aarch64"
    construct = ("import platform, torch, causal_conv1d_cuda, selective_scan_cuda, mamba_ssm, causal_conv1d\n"
                 "from mamba_ssm import Mamba, Mamba2\n"
                 "Mamba(d_model=16, device='cpu'); Mamba2(d_model=64, device='cpu')\n"
                 "print(platform.machine(), torch.__version__, mamba_ssm.__version__, causal_conv1d.__version__)")
    probe = subprocess.run([str(qemu), "-L", str(sysroot_env / "aarch64-conda-linux-gnu/sysroot"),
                            str(prefix / "bin" / f"python{PYTHON_AARCH64}"), "-c", construct],
                           capture_output=True, text=True, timeout=1200, env={"PYTHONNOUSERSITE": "1", "PATH": "/usr/bin:/bin"})
    assert probe.returncode == 0, probe.stderr[-3000:]
    machine, torch_version, mamba, causal = probe.stdout.split()[-4:]
    assert (machine, mamba, causal) == ("aarch64", "2.3.2.post1", "1.7.0") and torch_version.startswith(TORCH)
