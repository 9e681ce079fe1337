"""The stand-in's linux-aarch64 toolchain, end to end: Debian's cross gcc and aarch64 glibc repacked
as conda-forge's packages, installed with py-rattler, activated as rattler-build activates a build
environment, compile C++ that runs under user-mode emulation and reads nothing of the build machine."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from ssm_conda import cli
from ssm_conda.dev.solving import install_into_prefix
from ssm_conda.paths import cache_dir
from ssm_conda.standin import debian

EM_AARCH64 = 183  # ELF e_machine (elf.h)

PROGRAM = r"""
#include <iostream>
#include <thread>
#include <vector>
int main() {
  std::vector<int> seen(4);
  std::vector<std::thread> workers;
  for (int i = 0; i < 4; ++i) workers.emplace_back([&seen, i] { seen[i] = i * i; });
  for (auto& w : workers) w.join();
  std::cout << "aarch64 says " << seen[3] << std::endl;
}
"""


def elf_machine(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[18:20], "little")


@pytest.mark.slow
def test_cross_toolchain_builds_aarch64_code_that_runs_under_emulation(tmp_path):
    channel = tmp_path / "channel"
    assert cli.dev_main(["standin", "--target-platform", "linux-aarch64", "--dir", str(channel)]) == 0
    build, host = tmp_path / "build_env", tmp_path / "host_env"
    install_into_prefix([channel.as_uri()], ["gxx_linux-aarch64"], build, platform="linux-64")
    installed = install_into_prefix([channel.as_uri()], ["libstdcxx"], host, platform="linux-aarch64")
    assert any(r.startswith("libgcc=") for r in installed)

    (tmp_path / "hello.cpp").write_text(PROGRAM)
    activate = " && ".join(f"source {script}" for script in sorted((build / "etc/conda/activate.d").glob("*.sh")))
    script = (f"{activate} && echo $CONDA_BUILD_SYSROOT && $CXX -v $CXXFLAGS hello.cpp -o hello $LDFLAGS -pthread "
              "2>search.txt")
    env = {"PATH": "/usr/bin:/bin", "BUILD_PREFIX": str(build), "PREFIX": str(host), "CONDA_BUILD": "1"}
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr + (tmp_path / "search.txt").read_text()
    sysroot = Path(result.stdout.strip())
    assert sysroot == build / "aarch64-conda-linux-gnu" / "sysroot"

    binary = tmp_path / "hello"
    assert elf_machine(binary) == EM_AARCH64
    # every header and library directory the compiler searched lies in the build environment or the host one
    search = (tmp_path / "search.txt").read_text()
    headers = search.split("#include <...> search starts here:")[1].split("End of search list.")[0].split()
    libraries = next(line for line in search.splitlines() if line.startswith("LIBRARY_PATH="))
    for directory in [*headers, *libraries.removeprefix("LIBRARY_PATH=").split(":")]:
        resolved = Path(directory).resolve()
        assert resolved.is_relative_to(build) or resolved.is_relative_to(host), directory

    qemu = debian.fetch(cache_dir() / "debian", debian.QEMU).root / "qemu-user/usr/bin/qemu-aarch64"
    run = subprocess.run([str(qemu), "-L", str(sysroot), "-E", f"LD_LIBRARY_PATH={host / 'lib'}", str(binary)],
                         capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stdout) == (0, "aarch64 says 9\n"), run.stderr
