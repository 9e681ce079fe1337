"""The stand-in's linux-aarch64 packages, end to end, added to the session's stand-in channel:
Debian's cross gcc and aarch64 glibc repacked as conda-forge's packages, installed with py-rattler,
activated as rattler-build activates a build environment, compile C++ that runs under user-mode
emulation and reads nothing of the build machine; Debian's aarch64 CPython, repacked, runs there with
conda's site-packages and sysconfig; and rattler-build cross-compiles a Python extension with
cross-python, as conda-forge does, into a linux-aarch64 package that imports under emulation."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from ssm_conda.paths import cache_dir
from ssm_conda_dev.solving import install_into_prefix
from ssm_conda_dev.standin import debian

EM_AARCH64 = 183  # ELF e_machine (elf.h)
RECIPE = Path(__file__).parent / "cross_extension" / "recipe.yaml"

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


@pytest.fixture(scope="module")
def channel(standin_aarch64) -> Path:
    return standin_aarch64


def qemu() -> Path:
    return debian.fetch(cache_dir() / "debian", debian.QEMU).root / "qemu-user/usr/bin/qemu-aarch64"


@pytest.mark.slow
def test_cross_toolchain_builds_aarch64_code_that_runs_under_emulation(channel, tmp_path):
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

    run = subprocess.run([str(qemu()), "-L", str(sysroot), "-E", f"LD_LIBRARY_PATH={host / 'lib'}", str(binary)],
                         capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stdout) == (0, "aarch64 says 9\n"), run.stderr


@pytest.mark.slow
def test_aarch64_python_runs_with_conda_layout(channel, tmp_path):
    """Debian's interpreter, repacked: conda's site-packages on sys.path and as pip's target, sysconfig
    naming this prefix and conda's cross compilers, under the names cross-python reads."""
    sysroot_env, prefix = tmp_path / "build_env", tmp_path / "host_env"
    install_into_prefix([channel.as_uri()], ["sysroot_linux-aarch64"], sysroot_env, platform="linux-64")
    install_into_prefix([channel.as_uri()], ["python 3.11.*"], prefix, platform="linux-aarch64")
    assert (prefix / "lib/python3.11/_sysconfigdata_aarch64_conda_linux_gnu.py").is_file()
    assert elf_machine((prefix / "bin/python3.11").resolve()) == EM_AARCH64
    probe = ("import json, site, sys, sysconfig, ctypes, ssl, zlib, lzma, bz2, sqlite3; print(json.dumps(["
             "[p for p in sys.path if p.endswith('-packages')], sysconfig.get_paths()['purelib'], "
             "sysconfig.get_config_var('CC'), sysconfig.get_config_var('INCLUDEPY'), sysconfig.get_config_var('EXT_SUFFIX')]))")
    run = subprocess.run([str(qemu()), "-L", str(sysroot_env / "aarch64-conda-linux-gnu/sysroot"),
                          str(prefix / "bin/python3.11"), "-c", probe], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    site_packages = str(prefix / "lib/python3.11/site-packages")
    paths, purelib, cc, include, suffix = json.loads(run.stdout)
    assert site_packages in paths and purelib == site_packages
    assert cc.split()[0] == "aarch64-conda-linux-gnu-gcc" and include == str(prefix / "include/python3.11")
    assert suffix == ".cpython-311-aarch64-linux-gnu.so" and (prefix / "include/python3.11/Python.h").is_file()


@pytest.mark.slow
def test_cross_python_builds_an_extension_that_imports_under_emulation(channel, tmp_path):
    from rattler_build import PlatformConfig, RenderConfig, Stage0Recipe, ToolConfiguration, VariantConfig

    overrides = yaml.safe_load((channel / "standin-variants.yaml").read_text())
    # py-rattler-build takes the host platform from the variant (the render config's is not passed on)
    variants = {"python": ["3.11"], "c_compiler": ["gcc"], "cxx_compiler": ["gxx"], "c_stdlib": ["sysroot"],
                "host_platform": ["linux-aarch64"], **overrides}
    platform = PlatformConfig(target_platform="linux-aarch64", build_platform="linux-64", host_platform="linux-aarch64")
    (rendered,) = Stage0Recipe.from_file(RECIPE).render(VariantConfig.from_yaml(yaml.safe_dump(variants)),
                                                        RenderConfig(platform))
    assert "cross-python_linux-aarch64" in rendered.recipe.requirements.build
    output = tmp_path / "output"
    rendered.run_build(tool_config=ToolConfiguration(test_strategy="skip"), output_dir=output,
                       channels=[channel.as_uri()])
    (package,) = (output / "linux-aarch64").glob("hello-ext-0.1-py311*.conda")

    sysroot_env, prefix = tmp_path / "build_env", tmp_path / "host_env"
    install_into_prefix([channel.as_uri()], ["sysroot_linux-aarch64"], sysroot_env, platform="linux-64")
    install_into_prefix([output.as_uri(), channel.as_uri()], ["hello-ext"], prefix, platform="linux-aarch64")
    (extension,) = (prefix / "lib/python3.11/site-packages").glob("hello_ext.cpython-311-aarch64-linux-gnu.so")
    assert elf_machine(extension) == EM_AARCH64
    run = subprocess.run([str(qemu()), "-L", str(sysroot_env / "aarch64-conda-linux-gnu/sysroot"),
                          str(prefix / "bin/python3.11"), "-c", "import hello_ext; print(hello_ext.machine())"],
                         capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stdout) == (0, "aarch64\n"), run.stderr
