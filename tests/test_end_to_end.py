"""The whole pipeline, for real, offline: stand-in channel -> ssm-conda build -> install -> import.

Marked tests (run with --slow; the stand-in channel is tests/conftest.py's session fixture): the
first builds the unchanged recipe for variants/cuda130.yaml's CUDA and newest pytorch minor / the
running Python / the sm90 GPU generation against the offline stand-in channel (conda-forge's
packages, checked against its record; no system CUDA toolkit in reach), with rattler-build's own
solve, build environments, source fetch, patches, build script, nvcc compile, linking checks, test
section and index, then installs the result with py-rattler into a fresh prefix and inspects it. Each
package is built once, with the variant file's Python (the oldest), and installs on every later CPython: the tests
install it on the running Python and on Python B (another CPython with a shared libpython, found under
~/.pyenv/versions or named by SSM_CONDA_PYTHON_B_PREFIX).
"""

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from dataclasses import replace
from importlib.metadata import version
from pathlib import Path

import pytest
from rattler.exceptions import SolverError
from ssm_conda.console import human_duration, human_size
from ssm_conda.matrix import plan
from ssm_conda.paths import cache_dir
from ssm_conda.selection import Selection
from ssm_conda_dev.solving import install_into_prefix, solve_for_machine

from tests.conda_client import linked
from tests.recipe.causal_conv1d.recipe_modules import SHARED_TESTS, load_recipe_module
from tests.recipe.generation_channel import package_record
from tests.standin_channel import CUDA, GENERATION, GPU, PYTHON, RUNNING, TORCH, TORCH_NEXT, run, without_system_cuda

recipe_conftest = load_recipe_module("conftest")
check_arch = load_recipe_module("check_arch", SHARED_TESTS)


def cuobjdump() -> str:
    """NVIDIA's wheel (requirements-dev.txt) or conda-forge's cuda-cuobjdump (pixi's test environment)."""
    for root in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]):
        for candidate in Path(root).glob("nvidia/cu*/bin/cuobjdump"):
            return str(candidate)
    found = shutil.which("cuobjdump")
    if found:
        return found
    pytest.fail("cuobjdump not found: pip install -r requirements-dev.txt (nvidia-cuda-cuobjdump)")


# ssm-conda build's build root for this module (a folder of its own, not the machine's default), and conda-build's
# output folder (test_conda_build_builds_what_ssm_conda_builds), which builds in a folder of its own each time: it
# shares no objects with ssm-conda build's through the compiler cache (docs/building.md).
BUILD_ROOT = cache_dir() / "e2e-build-root"
CB_OUTPUT = cache_dir() / "e2e-cbuild"


def tag(python: str) -> str:
    """cp310abi3 for 3.10: the build strings' mark of a package for that CPython and every later one."""
    return "cp" + python.replace(".", "") + "abi3"


@pytest.fixture(scope="module")
def ccache(tmp_path_factory) -> Path:
    """A compiler cache of this run alone: what variant B finds in it, the first build put there."""
    return tmp_path_factory.mktemp("ccache")


def assert_gpu_tests_skipped_with_reason(output: str) -> None:
    """recipe/causal-conv1d/tests ran on this GPU-less machine: the CPU checks passed; the 360 kernel tests and
    upstream's subset (collected: its file and einops and triton are in the test environment) were
    skipped, saying why; the rest of upstream's file was deselected."""
    assert f"{recipe_conftest.SKIP_MARKER} no NVIDIA driver on this machine" in output, output[-3000:]
    assert "not collected" not in output, output[-3000:]
    summary = re.search(r"^=+ (\d+) passed, (\d+) skipped, (\d+) deselected in [\d.]+s =+$", output, re.M)
    assert summary, output[-3000:]
    passed, skipped, deselected = map(int, summary.groups())
    assert passed >= 2 and skipped >= 360 + 532 and deselected > 10_000, summary.group(0)


def build_variant(channel: Path, output: Path, python: str, ccache: Path, package_name: str = "causal-conv1d",
                  target_platform: str | None = None) -> tuple[Path, str, float]:
    """`ssm-conda build --package NAME` for one variant, its output streamed (a long compile shows
    progress in the CI log)."""
    start = time.monotonic()
    command = [sys.executable, "-m", "ssm_conda", "build", "--package", package_name, "--channel", channel.as_uri(),
               "--output-dir", str(output), "--cuda", CUDA, "--python", python, "--torch", TORCH, "--generation", GENERATION,
               *(["--target-platform", target_platform] if target_platform else [])]
    env = {**without_system_cuda(), "SSM_CONDA_CCACHE_DIR": str(ccache), "SSM_CONDA_BUILD_ROOT": str(BUILD_ROOT)}
    with subprocess.Popen(command, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env) as process:
        for line in process.stdout:
            print(line, end="", flush=True)
    seconds = time.monotonic() - start
    assert process.returncode == 0, "ssm-conda build failed (log above)"
    build = f"cuda{CUDA.replace('.', '')}_{tag(python)}_torch{TORCH.replace('.', '')}_{GENERATION}_h"
    (package,) = output.glob(f"*/{package_name}-*-{build}*.conda")
    (log,) = output.glob(f"build-logs/{package_name}-{build}*.log")
    print(f"\npython {python} build: {human_duration(seconds)}, package {human_size(package.stat().st_size)}")
    return package, log.read_text(errors="replace"), seconds


@pytest.fixture(scope="module")
def built(standin, ccache):
    output = cache_dir() / "e2e-output"
    shutil.rmtree(output, ignore_errors=True)
    package, log, seconds = build_variant(standin, output, PYTHON, ccache)
    return output, package, log, seconds


def assert_sm90_extension_and_nothing_leaked(unpacked: Path, module: str, output: Path, ccache: Path) -> Path:
    """The kernel library (`module`/_C.abi3.so, patch "register ops with torch library") carries the sm90
    generation's code, sm_90 SASS and compute_90 PTX, and nothing else, every image compressed
    (--compress-mode=size); it uses no Python (no libpython or libtorch_python, no Py symbol); its RPATHs are
    relative; nothing from the build machine leaked into the package. Returns the library."""
    site = unpacked / "site-packages"  # a version-independent package's, which the installer moves
    extension = site / module / "_C.abi3.so"
    assert sorted(p.name for p in site.glob("*.so")) == [], "no extension module at the top any more"
    assert check_arch.python_references(extension.read_bytes()) == []
    dynamic = run("readelf", "-d", str(extension), capture_output=True).stdout  # binutils' reading, beside check_arch's
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", dynamic)
    assert needed and not [n for n in needed if "python" in n], needed
    elves = run(cuobjdump(), "--list-elf", str(extension), capture_output=True).stdout
    archs = set(re.findall(r"\.(sm_\w+)\.cubin", elves))
    assert archs == {"sm_90"}, elves
    ptx = run(cuobjdump(), "--list-ptx", str(extension), capture_output=True).stdout
    assert set(re.findall(r"\.(sm_\w+)\.ptx", ptx)) == {"sm_90"}, ptx
    images = check_arch.all_images(check_arch.read_fatbins(extension))
    assert {(i.name, i.compressed) for i in images} == {("sm_90", True), ("compute_90", True)}, images
    for rpath in re.findall(r"\((?:RPATH|RUNPATH)\)\s+Library (?:rpath|runpath): \[(.*)\]", dynamic):
        assert all(p.startswith("$ORIGIN") for p in rpath.split(":")), rpath
    # Installed text files must not name the build machine's paths (info/ records the build's own
    # directories by design); no file at all may name the compiler cache, which reaches the build
    # only as a secret.
    ccache_dir = str(ccache).encode()
    leaked = []
    for f in unpacked.rglob("*"):
        if not f.is_file():
            continue
        data = f.read_bytes()
        installed_text = f.parts[len(unpacked.parts)] != "info" and b"\0" not in data[:4096]
        if ccache_dir in data or (installed_text and (b"rattler-build_" in data or str(output).encode() in data)):
            leaked.append(str(f.relative_to(unpacked)))
    assert not leaked, leaked
    return extension


def assert_servable(channel: Path) -> None:
    """Every file of the channel's subdirs 0644 and every folder 0755, as conda-index writes them (rattler-build
    writes each package 0600: a web server or another account could not read it)."""
    paths = [p for subdir in channel.iterdir() if subdir.name in ("noarch", "linux-64", "linux-aarch64")
             for p in (subdir, *subdir.rglob("*")) if not p.is_symlink()]
    wrong = {str(p): oct(p.stat().st_mode & 0o777) for p in paths if p.stat().st_mode & 0o777 != (0o755 if p.is_dir() else 0o644)}
    assert paths and not wrong, wrong


def unpack(package: Path, destination: Path) -> Path:
    from rattler.package_streaming import extract

    extract(package, destination)
    return destination


@pytest.fixture(scope="module")
def unpacked(built, tmp_path_factory) -> Path:
    return unpack(built[1], tmp_path_factory.mktemp("unpacked"))


@pytest.mark.slow
def test_end_to_end(standin, built, unpacked, ccache, tmp_path):
    output, package, log, _seconds = built
    # The output channel and the stand-in's, as a web server or another account reads them.
    assert_servable(output)
    assert_servable(standin)

    # The package: name, version, build string, run dependencies.
    index = json.loads((unpacked / "info" / "index.json").read_text())
    assert index["name"] == "causal-conv1d" and index["version"] == "1.7.0"
    torch_tag = TORCH.replace(".", "")
    assert re.fullmatch(rf"cuda130_{tag(PYTHON)}_torch{torch_tag}_sm90_h[0-9a-f]{{7}}_0", index["build"]), index["build"]
    # version-independent (conda-forge's abi3 packages): linked like noarch: python, in linux-64
    assert (index["subdir"], index.get("noarch")) == ("linux-64", "python"), index
    depends = index["depends"]
    # The generation's gates, exactly as the solver tests (tests/recipe/test_generations.py) derive them
    # from the rendered recipe: cuda-arch's run_export, the __cuda_arch requirement, no track feature.
    (rendered,) = plan(Selection(cuda=CUDA, python=PYTHON, torch=TORCH, generations=(GENERATION,),
                                 packages=("causal-conv1d",)))
    derived = package_record(rendered)
    gates = [d for d in depends if d.startswith(("cuda-arch", "__cuda_arch"))]
    assert sorted(gates) == [d for d in derived["depends"] if d.startswith(("cuda-arch", "__cuda_arch"))], depends
    assert sorted(gates) == ["__cuda_arch >=9.0,<10", "cuda-arch >=9.0"], depends
    assert "track_features" not in index and "track_features" not in derived
    assert f"pytorch {TORCH}.* cuda*" in depends, depends
    # pytorch's run_exports, as conda-forge's: pytorch and libtorch, pinned to the minor
    for name in ("pytorch", "libtorch"):
        assert any(re.fullmatch(rf"{name} >={re.escape(TORCH)}(\.\d+)*,<{re.escape(TORCH_NEXT)}\.0a0", d)
                   for d in depends), depends
    # libcudart.so's file is cuda-cudart_linux-64's (cuda-cudart holds the lib/ symlink)
    assert "cuda-cudart_linux-64" in depends and any(d.startswith("cuda-cudart >=") for d in depends), depends
    assert any(re.fullmatch(r"cuda-version >=13\.0,<14(\.0a0)?", d) for d in depends), depends
    # python-abi3's run exports admit every CPython from the build's on (no python_abi: no Python X.Y pinned)
    assert {f"cpython >={PYTHON}", "_python_abi3_support 1.*", "python"} <= set(depends), depends
    assert not [d for d in depends if d.startswith("python_abi")], depends

    assert_sm90_extension_and_nothing_leaked(unpacked, "causal_conv1d", output, ccache)

    # The linking check ran with overlinking as an error, and passed.
    assert "Overlinking" not in log and "overlinking" not in log.lower().replace("overlinking_behavior", "")
    # nothing in the build named the usual system toolkit's folder (none was on PATH or CUDA_HOME)
    assert "/usr/local/cuda" not in log

    # The test section ran after the build, without a GPU: the arch check found exactly sm_90 (+PTX),
    # and every GPU test was skipped with the reason said.
    assert_gpu_tests_skipped_with_reason(log)
    # abi3audit found nothing beyond the stable ABI of the build's Python
    audit = r"_C\.abi3\.so: 1 extensions scanned; 0 ABI version mismatches and 0\s+ABI violations found"
    assert re.search(audit, log), log[-3000:]

    # Install from the output channel with py-rattler into a fresh prefix, as pixi would.
    prefix = tmp_path / "env"
    installed = install_into_prefix([output.as_uri(), standin.as_uri()], ["causal-conv1d"], prefix, cuda=CUDA,
                                    cuda_arch=GPU)
    assert any(r.startswith(f"causal-conv1d=1.7.0={index['build']}") for r in installed), installed
    probe = run(str(prefix / "bin" / "python"), "-c",
                "import causal_conv1d, causal_conv1d_cuda, torch\n"
                "print(causal_conv1d.__version__, torch.__version__, causal_conv1d_cuda.causal_conv1d_fwd.default._schema)",
                capture_output=True, env={**os.environ, "PYTHONNOUSERSITE": "1"})
    assert probe.stdout.split()[0] == "1.7.0" and probe.stdout.split()[1].startswith(TORCH), probe.stdout
    # the kernels, registered as torch ops by the library the old module name loads
    assert "causal_conv1d::causal_conv1d_fwd(Tensor x, Tensor weight, Tensor? bias," in probe.stdout, probe.stdout


def probe_ops(prefix: Path, python: str) -> None:
    """In `prefix` (an environment of CPython `python`): both packages import and their kernels are torch ops."""
    probe = run(str(prefix / "bin" / "python"), "-c",
                "import sys, causal_conv1d, causal_conv1d_cuda, mamba_ssm, selective_scan_cuda\n"
                "print('%d.%d' % sys.version_info[:2], causal_conv1d_cuda.causal_conv1d_fwd.default._schema.name,\n"
                "      selective_scan_cuda.fwd.default._schema.name)",
                capture_output=True, env={**os.environ, "PYTHONNOUSERSITE": "1"})
    assert probe.stdout.split() == [python, "causal_conv1d::causal_conv1d_fwd", "selective_scan::fwd"], probe.stdout


@pytest.mark.slow
def test_one_package_installs_on_every_python(standin, built, built_mamba, python_b, tmp_path):
    """The packages built once with the oldest Python install on later ones (the running Python and Python B), from
    the same files, and their kernels load there as torch ops."""
    for python in dict.fromkeys((RUNNING, python_b[0])):
        prefix = tmp_path / f"py{python}"
        installed = install_into_prefix([built[0].as_uri(), standin.as_uri()], ["mamba-ssm", f"python {python}.*"], prefix,
                                        cuda=CUDA, cuda_arch=GPU)
        assert any(r.startswith(f"causal-conv1d=1.7.0={build_string(built[1])}") for r in installed), installed
        assert (prefix / "lib" / f"python{python}" / "site-packages" / "causal_conv1d" / "_C.abi3.so").is_file()
        probe_ops(prefix, python)


@pytest.mark.slow
@pytest.mark.python314
def test_the_packages_import_on_python_3_14(built, built_mamba, tmp_path):
    """CPython 3.14, which this machine lacks and the stand-in cannot repack: Debian sid's, through sid's own loader,
    with torch's cp314 wheel (tests/python314.py). The packages built with 3.10 are installed by py-rattler for a Python
    3.14 (an empty python 3.14 package: the installer needs only its version to place a noarch: python package's files)
    and imported there: both kernel libraries load and register their ops. (mamba_ssm itself also needs einops,
    transformers and triton, which this environment leaves out.)"""
    from rattler import PackageName, install
    from ssm_conda.channels import fetch_repodata, index_channel

    from tests.damaged_archives import build_package
    from tests.python314 import python314, torch_site

    python = python314(cache_dir())
    site = torch_site(python, cache_dir(), [cache_dir() / "wheels"])
    build_package(tmp_path / "python" / "linux-64", "python", "3.14.10", "0")
    index_channel(tmp_path / "python")
    records = [r for channel in ((tmp_path / "python").as_uri(), built[0].as_uri())
               for name in ("python", "causal-conv1d", "mamba-ssm")
               for r in fetch_repodata(channel, "linux-64").load_records(PackageName(name))]
    prefix = tmp_path / "py314"
    asyncio.run(install(records, target_prefix=prefix, show_progress=False))
    ours = prefix / "lib" / "python3.14" / "site-packages"
    assert (ours / "causal_conv1d" / "_C.abi3.so").is_file() and (ours / "mamba_ssm" / "_C.abi3.so").is_file()
    probe = run(str(python), "-s", "-c",
                "import sys, causal_conv1d, causal_conv1d_cuda, selective_scan_cuda\n"
                "print('%d.%d' % sys.version_info[:2], causal_conv1d_cuda.causal_conv1d_fwd.default._schema.name,\n"
                "      selective_scan_cuda.fwd.default._schema.name)",
                capture_output=True, env={**os.environ, "PYTHONPATH": f"{ours}{os.pathsep}{site}"})
    assert probe.stdout.split()[-3:] == ["3.14", "causal_conv1d::causal_conv1d_fwd", "selective_scan::fwd"], probe.stdout
    print(f"CPython 3.14 ({run(str(python), '-VV', capture_output=True).stdout.strip()}): {probe.stdout.strip()}")


@pytest.mark.slow
def test_gpu_test_reruns_the_package_tests(standin, built, tmp_path):
    """`ssm-conda-dev gpu-test` re-runs the built package's test section (rattler-build test), as on a GPU box.

    Without a GPU only --allow-no-gpu runs: the stored tests of the package pass, and the kernel
    tests' log says they were skipped and why; without --allow-no-gpu it refuses before solving anything.
    """
    output, package, _log, _seconds = built
    command = [sys.executable, "-m", "ssm_conda_dev", "gpu-test", str(package),
               "--channel", str(output), "--channel", str(standin), "--log-dir", str(tmp_path / "logs")]
    refused = subprocess.run(command, capture_output=True, text=True)
    assert refused.returncode == 1 and "no GPU on this machine" in refused.stderr, refused.stdout + refused.stderr
    assert not (tmp_path / "logs").exists()

    result = subprocess.run([*command, "--allow-no-gpu"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    # The package stores three tests: the import test on the oldest and the newest Python (0), abi3audit (1) and
    # recipe/causal-conv1d/tests (2); package_contents is checked at build time only.
    logs = sorted((tmp_path / "logs").glob("*.log"))
    assert [p.name.rsplit(".", 2)[1] for p in logs] == ["test0", "test1", "test2"], logs
    assert "3 passed, 0 failed" in result.stdout, result.stdout
    script_log = logs[2]
    assert_gpu_tests_skipped_with_reason(script_log.read_text())


@pytest.fixture(scope="module")
def built_mamba(standin, built, ccache) -> tuple[Path, str, float]:
    """mamba-ssm for the first variant, into the output channel that holds its causal-conv1d."""
    return build_variant(standin, built[0], PYTHON, ccache, "mamba-ssm")


@pytest.mark.slow
def test_mamba_ssm_end_to_end(standin, built, built_mamba, ccache, tmp_path):
    """mamba-ssm alone from the output channel brings the causal-conv1d of the same variant, and
    its modules import and construct (on the CPU: no GPU here)."""
    output, cc_package, _log, _seconds = built
    package, log, _seconds = built_mamba
    unpacked = unpack(package, tmp_path / "unpacked")
    index = json.loads((unpacked / "info" / "index.json").read_text())
    cc_build = cc_package.name.removesuffix(".conda").rsplit("-", 1)[1]
    assert (index["name"], index["version"], index["build"]) == ("mamba-ssm", "2.3.2.post1", cc_build)
    depends = index["depends"]
    assert f"pytorch {TORCH}.* cuda*" in depends and "causal-conv1d >=1.7,<2" in depends, depends
    assert not [d for d in depends if d.split()[0] in ("tilelang", "apache-tvm-ffi", "quack-kernels", "ninja")], depends
    assert_sm90_extension_and_nothing_leaked(unpacked, "mamba_ssm", output, ccache)
    assert "Overlinking" not in log
    # The test section ran: the arch checks (shared/tests/arch_tests.py, through the path source) and
    # the construction without the optional kernels passed; every GPU test skipped saying why.
    summary = re.search(r"^=+ (\d+) passed, (\d+) skipped in [\d.]+s =+$", log, re.M)
    assert summary and int(summary.group(1)) >= 3 and int(summary.group(2)) >= 30, log[-3000:]
    assert "mamba-ssm GPU tests skipped: no NVIDIA driver on this machine" in log, log[-3000:]

    prefix = tmp_path / "env"
    installed = install_into_prefix([output.as_uri(), standin.as_uri()], ["mamba-ssm"], prefix, cuda=CUDA,
                                    cuda_arch=GPU)
    assert any(r.startswith(f"causal-conv1d=1.7.0={cc_build}") for r in installed), installed
    construct = ("import mamba_ssm, causal_conv1d\n"
                 "from mamba_ssm import Mamba, Mamba2\n"
                 "Mamba(d_model=16, device='cpu'); Mamba2(d_model=64, device='cpu')\n"
                 "print(mamba_ssm.__version__, causal_conv1d.__version__)")
    probe = run(str(prefix / "bin" / "python"), "-c", construct, capture_output=True,
                env={**os.environ, "PYTHONNOUSERSITE": "1"})
    assert probe.stdout.split()[-2:] == ["2.3.2.post1", "1.7.0"], probe.stdout

    # The gate, on the packages built here: only a GPU of the sm90 generation gets them. (The channel
    # holds no other generation and no all-architecture build: the solver tests cover the choice.)
    channels = [output.as_uri(), standin.as_uri()]
    for gpu in ("8.6", "10.0", None):
        with pytest.raises(SolverError, match="__cuda_arch >=9.0,<10"):
            solve_for_machine(channels, ["mamba-ssm"], cuda=CUDA, cuda_arch=gpu)


@pytest.mark.slow
def test_a_second_build_into_another_folder_is_byte_identical(standin, built, ccache, tmp_path):
    """The same variant built again later into another output folder, its CUDA objects from the compiler cache that
    the first build (an empty cache) filled: the same bytes (docs/reproducible.md)."""
    package, _log, seconds = build_variant(standin, tmp_path / "again", PYTHON, ccache)
    assert package.read_bytes() == built[1].read_bytes()
    print(f"the second build: {human_duration(seconds)} (figures, not asserted)")


def verify(*args: str, ccache: Path) -> str:
    """`ssm-conda verify ARGS` (it must pass), its output streamed."""
    command = [sys.executable, "-m", "ssm_conda", "verify", *args]
    with subprocess.Popen(command, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          env={**without_system_cuda(), "SSM_CONDA_CCACHE_DIR": str(ccache),
                               "SSM_CONDA_BUILD_ROOT": str(BUILD_ROOT)}) as process:
        output = "".join(print(line, end="", flush=True) or line for line in process.stdout)
    assert process.returncode == 0, "ssm-conda verify failed (log above)"
    return output


@pytest.mark.slow
def test_verify_rebuilds_both_packages_byte_identical(standin, built, built_mamba, ccache):
    """rattler-build's rebuild from this checkout's recipe and the packages each package records, all checked first
    (no network: the sdists are in the build root's source cache), written as build writes it: identical, one row
    per package."""
    start = time.monotonic()
    output = verify(str(built[1]), str(built_mamba[0]), "-c", str(standin), ccache=ccache)
    assert [row.split()[2] for row in output.splitlines() if row.startswith(("causal-conv1d ", "mamba-ssm "))] == [
        "identical", "identical"], output
    print(f"verify, both packages, with the cache: {human_duration(time.monotonic() - start)} (figures, not asserted)")


@pytest.mark.slow
def test_verify_with_an_empty_compiler_cache_is_byte_identical(standin, built, tmp_path):
    """Every object compiled again (nvcc's temporary names are the object's, not its process id's): the same bytes."""
    start = time.monotonic()
    output = verify(str(built[1]), "--no-cache", "-c", str(standin), ccache=tmp_path / "unused")
    assert "compiler cache: off" in output and " identical " in output, output
    print(f"verify --no-cache of causal-conv1d: {human_duration(time.monotonic() - start)} (figures, not asserted)")


def build_string(package: Path) -> str:
    return package.name.removesuffix(".conda").rsplit("-", 1)[1]


@pytest.mark.slow
def test_conda_installs_the_channel(standin, built, built_mamba, conda, tmp_path):
    """Real conda (26.7.1, the classic solver, the __cuda_arch plugin): mamba-ssm from the output channel, in an
    environment of the running Python (mamba-ssm needs 3.11 or later: transformers), brings causal-conv1d of the same
    build; both import, `pip check` is clean; causal-conv1d installs into an existing environment of Python 3.10;
    the sm90 packages go to an H100 (9.0) only, never to an A6000 (8.6) or a machine that reports no __cuda_arch."""
    output, cc_package = built[0], built[1]
    channels = ("--override-channels", "-c", output.as_uri(), "-c", standin.as_uri())
    env = tmp_path / "mamba"
    conda.run("create", "-p", str(env), *channels, f"python={RUNNING}", "mamba-ssm", cuda=CUDA, cuda_arch=GPU)
    listed = {p["name"]: p["build_string"] for p in json.loads(conda.run("list", "-p", str(env), "--json").stdout)}
    assert listed["mamba-ssm"] == listed["causal-conv1d"] == build_string(cc_package), listed
    probe = "import causal_conv1d_cuda, selective_scan_cuda, causal_conv1d, mamba_ssm; print(mamba_ssm.__version__)"
    clean = {**os.environ, "PYTHONNOUSERSITE": "1"}
    assert run(str(env / "bin" / "python"), "-c", probe, capture_output=True, env=clean).stdout.split() == ["2.3.2.post1"]
    run(str(env / "bin" / "python"), "-m", "pip", "check", env=clean)

    existing = tmp_path / "existing"
    conda.run("create", "-p", str(existing), *channels, f"python={PYTHON}", cuda=CUDA, cuda_arch=GPU)
    conda.run("install", "-p", str(existing), *channels, "causal-conv1d", cuda=CUDA, cuda_arch=GPU)
    run(str(existing / "bin" / "python"), "-c", "import causal_conv1d_cuda, causal_conv1d", env=clean)

    for gpu in ("8.6", None):
        answer = conda.json("create", "--dry-run", "-p", str(tmp_path / "refused"), *channels, f"python={RUNNING}",
                            "mamba-ssm", cuda=CUDA, cuda_arch=gpu)
        assert not linked(answer, "mamba-ssm", "causal-conv1d") and "__cuda_arch" in answer.get("message", ""), answer


@pytest.mark.slow
def test_a_gpu_bundle_of_the_built_packages(built, built_mamba, tmp_path):
    """`ssm-conda-dev gpu-bundle` of the variant built above (docs/testing.md, "The GPU check"): one file under
    48 MiB with both compiled extensions and their test files; its runner, with this Python (a CPU torch), refuses
    in one line before anything runs. The GPU run itself needs a GPU node."""
    bundle = tmp_path / "check.pyz"
    run(sys.executable, "-m", "ssm_conda_dev", "gpu-bundle", "--output-dir", str(built[0]), "--cuda", CUDA, "--python",
        PYTHON, "--torch", TORCH, "--generation", GENERATION, "--bundle", str(bundle))
    size = bundle.stat().st_size
    print(f"GPU bundle of {GENERATION} for Python {PYTHON}, torch {TORCH}: {human_size(size)} (figure, not asserted)")
    assert size < 48 * 2**20
    with zipfile.ZipFile(bundle) as archive:
        names, manifest = archive.namelist(), json.loads(archive.read("manifest.json"))
    site = "prefix/site-packages"
    for module, library in (("causal_conv1d_cuda", "causal_conv1d"), ("selective_scan_cuda", "mamba_ssm")):
        assert {f"{site}/{module}.py", f"{site}/{library}/_C.abi3.so"} <= set(names), module
    for package in manifest["packages"]:
        (script,) = [t["script"] for t in package["tests"] if "script" in t]
        assert f"prefix/{script['cwd']}/tests/test_kernels.py" in names, script
    result = subprocess.run([sys.executable, str(bundle)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert (result.returncode, result.stderr.strip().splitlines()[-1:]) == (
        4, [f"error: no usable GPU: torch {version('torch')} is a CPU build; run this with a CUDA {CUDA} build of torch "
            f"{TORCH} on a machine with an NVIDIA GPU"]), result
    assert not (tmp_path / "gpu-check-results").exists()


@pytest.mark.slow
def test_conda_with_the_rattler_solver_picks_what_the_classic_one_does(standin, built, built_mamba, conda, tmp_path):
    """conda-rattler-solver (resolvo, pixi's solver, which enforces constrains on virtual packages): mamba-ssm and
    causal-conv1d of the sm90 build for an H100, nothing for an A6000 (8.6) or no __cuda_arch. Solving is all that
    differs from the classic solver's install above."""
    rattler, cc_package = replace(conda, solver="rattler"), built[1]
    channels = ("--override-channels", "-c", built[0].as_uri(), "-c", standin.as_uri())
    for gpu, builds in (("9.0", {"mamba-ssm": build_string(cc_package), "causal-conv1d": build_string(cc_package)}),
                        ("8.6", {}), (None, {})):
        answer = rattler.json("create", "--dry-run", "-p", str(tmp_path / "env"), *channels, f"python={RUNNING}",
                              "mamba-ssm", cuda=CUDA, cuda_arch=gpu)
        assert linked(answer, "mamba-ssm", "causal-conv1d") == builds, answer
        assert builds or "__cuda_arch" in answer.get("message", ""), answer


@pytest.mark.slow
def test_conda_build_builds_what_ssm_conda_builds(standin, built, conda, ccache, tmp_path):
    """`conda build` (conda-build 26.7.1 through py-rattler-build) of the one variant `ssm-conda plan
    --write-variants` wrote gives ssm-conda's package: name, build string, run requirements, file list."""
    package = built[1]
    selection = tmp_path / "selection.yaml"
    run(sys.executable, "-m", "ssm_conda", "plan", "--package", "causal-conv1d", "--channel", str(standin), "--cuda", CUDA,
        "--python", PYTHON, "--torch", TORCH, "--generation", GENERATION, "--write-variants", str(selection))
    cb_output = CB_OUTPUT
    shutil.rmtree(cb_output, ignore_errors=True)
    start = time.monotonic()
    result = conda.run("build", "recipe/causal-conv1d", "-m", str(selection), "--override-channels", "-c", standin.as_uri(),
                       "--output-folder", str(cb_output), cuda=CUDA, cuda_arch=GPU, cwd=Path.cwd(),
                       env={**without_system_cuda(), "SSM_CONDA_CCACHE_DIR": str(ccache)})
    print(result.stdout[-2000:], f"\nconda build: {human_duration(time.monotonic() - start)}")
    (theirs,) = cb_output.glob(f"*/{package.name}")
    ours_dir, theirs_dir = unpack(package, tmp_path / "ours"), unpack(theirs, tmp_path / "theirs")
    index = [json.loads((d / "info" / "index.json").read_text()) for d in (ours_dir, theirs_dir)]
    assert [(i["name"], i["version"], i["build"], sorted(i["depends"])) for i in index[1:]] == \
           [(index[0]["name"], index[0]["version"], index[0]["build"], sorted(index[0]["depends"]))]
    files = [sorted(p["_path"] for p in json.loads((d / "info" / "paths.json").read_text())["paths"])
             for d in (ours_dir, theirs_dir)]
    assert files[0] == files[1]


PLANTED_SOURCE = "int plant(void);\nint plant(void) { return 0; }\n"


def build_planted(channel: Path, output: Path, name: str, run: list[str], links: str) -> str:
    """A tiny shared library linked against `links`, built against the stand-in with causal-conv1d's
    own dynamic_linking rules and host CUDA packages: rattler-build's log (a failed build's included)."""
    import yaml
    from rattler_build import PlatformConfig, RenderConfig, Stage0Recipe, ToolConfiguration, VariantConfig

    real = yaml.safe_load(Path("recipe/causal-conv1d/recipe.yaml").read_text())
    recipe = {
        "schema_version": 1, "package": {"name": name, "version": "1.0"},
        "build": {"number": 0, "dynamic_linking": real["build"]["dynamic_linking"],
                  "script": ["echo '" + PLANTED_SOURCE.replace("\n", " ") + "' > plant.c",
                             f"$CC -shared -o $PREFIX/lib/lib{name}.so plant.c -L$PREFIX/lib -Wl,--no-as-needed {links}"]},
        "requirements": {"build": ["${{ compiler('c') }}", "${{ stdlib('c') }}"],
                         "host": ["cuda-version ==" + CUDA, "cuda-cudart-dev", "libcublas"], "run": run},
    }
    folder = output / name
    folder.mkdir(parents=True)
    (folder / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    overrides = yaml.safe_load((channel / "standin-variants.yaml").read_text())
    variants = {"c_compiler": ["gcc"], "c_stdlib": ["sysroot"], **overrides}
    rendered = Stage0Recipe.from_file(folder / "recipe.yaml").render(
        VariantConfig.from_yaml(yaml.safe_dump(variants)), RenderConfig(PlatformConfig(target_platform="linux-64")))[0]
    lines: list[str] = []

    class Log:
        def on_log(self, event) -> None:
            lines.append(event.message)

        def on_build_step(self, event) -> None:
            pass

    try:
        rendered.run_build(tool_config=ToolConfiguration(test_strategy="skip"), output_dir=output / "out",
                           channels=[channel.as_uri()], progress_callback=Log())
    except Exception as exc:  # noqa: BLE001 - rattler-build's own error types
        lines.append(f"BUILD FAILED: {exc}")
    return "\n".join(lines)


@pytest.mark.slow
def test_the_linking_check_credits_libcudart_to_its_file_and_catches_a_stray_link(standin, tmp_path):
    """conda-forge's layout: lib/libcudart.so.13 (cuda-cudart) points at the file in cuda-cudart_linux-64,
    and rattler-build credits the library to that file's package. With causal-conv1d's linking rules:
    - today's run requirements without cuda-cudart_linux-64 fail (the overlinking the recipes had);
    - with it, as the recipes now have it, libcudart passes;
    - a library from a host package that is not a run requirement (libcublas) still fails."""
    cudart_file = "cuda-cudart_${{ target_platform }}"
    before = build_planted(standin, tmp_path, "before", [], "-lcudart")
    assert "BUILD FAILED" in before and re.search(r"Overlinking against: targets/x86_64-linux/lib/libcudart\.so\.13\.", before), \
        before[-3000:]
    fixed = build_planted(standin, tmp_path, "fixed", [cudart_file], "-lcudart")
    assert "BUILD FAILED" not in fixed, fixed[-3000:]
    stray = build_planted(standin, tmp_path, "stray", [cudart_file], "-lcudart -l:libcublas.so.13")
    assert "BUILD FAILED" in stray and re.search(r"Overlinking against: lib/libcublas\.so\.13", stray), stray[-3000:]
    print(re.search(r".*Overlinking against: targets.*", before)[0])
