"""recipe/shared/build-extension.sh sizes MAX_JOBS and NVCC_THREADS from the CPUs and memory the build may use.

The real script runs under bash against a fake /proc and /sys/fs/cgroup (SSM_CONDA_PROBE_ROOT)
with a stand-in $PYTHON that records what `pip install` would have been given. CPU_COUNT is 16 and
MemAvailable 64 GiB unless a case says otherwise; about 2 GB per nvcc thread, 3/4 of memory used.
"""

import os
import subprocess
from pathlib import Path

import pytest
from ssm_conda.paths import recipe_of

from tests.repo import RECIPES_DIR

CAUSAL_CONV1D_DIR = recipe_of("causal-conv1d").parent

GIB = 1 << 30
V1_UNLIMITED = "9223372036854771712"
SDIST_TIME = 1_700_000_000


def pip_environment(tmp_path: Path, probe_root: Path | None, cpus: int = 16, nvcc_help: str = "",
                    **env: str) -> dict[str, str]:
    """The environment build.sh runs `pip install` in; a fake nvcc on PATH prints nvcc_help."""
    recorded = tmp_path / "recorded"
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nenv -0 > {recorded}\n")
    python.chmod(0o755)
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "nvcc").write_text(f"#!/bin/sh\ncat <<'EOF'\n{nvcc_help}\nEOF\n")
    (bin_dir / "nvcc").chmod(0o755)
    environ = {k: v for k, v in os.environ.items()
               if k not in ("MAX_JOBS", "NVCC_THREADS", "SSM_CONDA_CCACHE_DIR", "SSM_CONDA_PROBE_ROOT")}
    # the script runs in the unpacked sdist, whose PKG-INFO gives the source's time
    (tmp_path / "PKG-INFO").write_text("Metadata-Version: 2.1\n")
    os.utime(tmp_path / "PKG-INFO", (SDIST_TIME, SDIST_TIME))
    environ.update(BUILD_PREFIX=str(tmp_path), SP_DIR=str(tmp_path), PYTHON=str(python), RECIPE_DIR=str(CAUSAL_CONV1D_DIR),
                   PKG_NAME="causal-conv1d", PATH=f"{bin_dir}:{os.environ['PATH']}", SRC_DIR=str(tmp_path / "src"),
                   TORCH_CUDA_ARCH_LIST="9.0", CPU_COUNT=str(cpus), SOURCE_DATE_EPOCH="1796512000")
    environ.update(env)
    if probe_root is not None:
        environ["SSM_CONDA_PROBE_ROOT"] = str(probe_root)
    subprocess.run(["bash", str(RECIPES_DIR / "shared" / "build-extension.sh")], cwd=tmp_path, env=environ,
                   check=True, capture_output=True, text=True)
    return dict(entry.split("=", 1) for entry in recorded.read_text().split("\0") if "=" in entry)


def run_build_sh(tmp_path: Path, probe_root: Path | None, cpus: int = 16, **env: str) -> tuple[str, str]:
    """(MAX_JOBS, NVCC_THREADS) as build.sh hands them to pip."""
    recorded = pip_environment(tmp_path, probe_root, cpus, **env)
    return recorded["MAX_JOBS"], recorded["NVCC_THREADS"]


def machine(root: Path, available_gib: int = 64, cgroup: str | None = None, **files: str) -> Path:
    """A fake root: /proc/meminfo, /proc/self/cgroup (when given) and files under /sys/fs/cgroup."""
    (root / "proc" / "self").mkdir(parents=True)
    (root / "proc" / "meminfo").write_text(
        f"MemTotal:       {2 * available_gib * 1048576} kB\nMemFree:        1024 kB\n"
        f"MemAvailable:   {available_gib * 1048576} kB\n")
    if cgroup is not None:
        (root / "proc" / "self" / "cgroup").write_text(cgroup)
    (root / "sys" / "fs" / "cgroup").mkdir(parents=True)
    for relative, content in files.items():
        path = root / "sys" / "fs" / "cgroup" / relative.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content + "\n")
    return root


SLURM_V2 = "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n"
SLURM_V2_DIRS = "system.slice__slurmstepd.scope__job_42"
V1 = "12:pids:/docker/abc\n4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n"


@pytest.mark.parametrize(
    ("available_gib", "cgroup", "files", "expected"),
    [
        pytest.param(64, None, {}, ("4", "4"), id="no-cgroup"),
        pytest.param(64, "0::/job\n", {"job__memory.max": str(32 * GIB)}, ("4", "3"), id="v2-limit"),
        pytest.param(64, "0::/job\n", {"job__memory.max": "max", "memory.max": "max"}, ("4", "4"), id="v2-max"),
        # the limit sits on the job, the process in a task cgroup below it whose own memory.max is "max"
        pytest.param(64, SLURM_V2, {f"{SLURM_V2_DIRS}__memory.max": str(8 * GIB),
                                    f"{SLURM_V2_DIRS}__step_0__user__task_0__memory.max": "max"},
                     ("3", "1"), id="v2-slurm-job-limit"),
        # a container's own namespace: its cgroup is the root of what it sees
        pytest.param(64, "0::/\n", {"memory.max": str(16 * GIB)}, ("4", "1"), id="v2-container"),
        pytest.param(64, "0::/job\n", {"job__cpu.max": "200000 100000"}, ("2", "1"), id="v2-cpu-quota"),
        pytest.param(64, "0::/job\n", {"job__cpu.max": "max 100000"}, ("4", "4"), id="v2-cpu-max"),
        pytest.param(8, "0::/job\n", {"job__memory.max": str(32 * GIB)}, ("3", "1"), id="available-below-limit"),
        pytest.param(64, V1, {"memory__docker__abc__memory.limit_in_bytes": str(8 * GIB)}, ("3", "1"), id="v1-limit"),
        pytest.param(64, V1, {"memory__docker__abc__memory.limit_in_bytes": V1_UNLIMITED,
                              "memory__memory.limit_in_bytes": V1_UNLIMITED}, ("4", "4"), id="v1-unlimited"),
        # v1 without a cgroup namespace: the host's path is listed, the container's cgroup mounted as the root
        pytest.param(64, V1, {"memory__memory.limit_in_bytes": str(16 * GIB)}, ("4", "1"), id="v1-container"),
        pytest.param(64, V1, {"cpu__docker__abc__cpu.cfs_quota_us": "300000",
                              "cpu__docker__abc__cpu.cfs_period_us": "100000"}, ("3", "1"), id="v1-cpu-quota"),
        pytest.param(64, V1, {"cpu__docker__abc__cpu.cfs_quota_us": "-1",
                              "cpu__docker__abc__cpu.cfs_period_us": "100000"}, ("4", "4"), id="v1-cpu-unlimited"),
    ],
)
def test_parallelism_from_machine_and_cgroup(tmp_path, available_gib, cgroup, files, expected):
    root = machine(tmp_path / "root", available_gib, cgroup, **files)
    assert run_build_sh(tmp_path, root) == expected


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param({"MAX_JOBS": "7", "NVCC_THREADS": "5"}, ("7", "5"), id="both"),
        # threads are sized for the caller's jobs: 16 CPUs / 2 jobs
        pytest.param({"MAX_JOBS": "2"}, ("2", "8"), id="max-jobs"),
        pytest.param({"NVCC_THREADS": "2"}, ("4", "2"), id="nvcc-threads"),
    ],
)
def test_caller_settings_are_kept(tmp_path, env, expected):
    root = machine(tmp_path / "root", 64, "0::/job\n", **{"job__memory.max": "max"})
    assert run_build_sh(tmp_path, root, **env) == expected


def test_caller_settings_are_kept_under_a_cgroup_limit(tmp_path):
    root = machine(tmp_path / "root", 64, "0::/job\n", **{"job__memory.max": str(4 * GIB)})
    assert run_build_sh(tmp_path, root, MAX_JOBS="3", NVCC_THREADS="2") == ("3", "2")
    assert run_build_sh(tmp_path, root) == ("1", "1")


def test_this_machine(tmp_path):
    """The real /proc and /sys/fs/cgroup: whole numbers, at most one job per CPU and four jobs."""
    cpus = os.cpu_count() or 1
    max_jobs, nvcc_threads = run_build_sh(tmp_path, None, cpus=cpus)
    assert 1 <= int(max_jobs) <= min(cpus, 4)
    assert int(nvcc_threads) >= 1


@pytest.mark.parametrize(("sources", "expected"), [(3, ("4", "16")), (9, ("10", "6"))])
def test_jobs_go_up_to_the_number_of_sources(tmp_path, sources, expected):
    """64 CPUs, 512 GB: causal-conv1d's 3 CUDA sources and a binding get 4 jobs of 16 threads,
    mamba-ssm's 9 and a binding 10 jobs of 6."""
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "binding.cpp").write_text("")
    for i in range(sources):
        (tmp_path / "csrc" / f"kernel{i}.cu").write_text("")
    assert run_build_sh(tmp_path, machine(tmp_path / "root", available_gib=512), cpus=64) == expected


NVCC_13_HELP = """--compress-mode [default,size,speed,balance,none]   (-compress-mode)
        Specify compression mode for fatbinary."""


@pytest.mark.parametrize(("nvcc_help", "expected"), [
    pytest.param(NVCC_13_HELP, "nvcc --compress-mode=size", id="nvcc-with-compress-mode"),
    pytest.param("--threads <number>   (-t)", "nvcc", id="nvcc-12.6"),
])
def test_fatbins_compressed_where_nvcc_can(tmp_path, nvcc_help, expected):
    root = machine(tmp_path / "root", 64)
    assert pip_environment(tmp_path, root, nvcc_help=nvcc_help)["PYTORCH_NVCC"] == expected


def cached_environment(tmp_path: Path) -> dict[str, str]:
    """The environment pip runs in with the compiler cache on (a fake ccache on PATH)."""
    root = machine(tmp_path / "root", 64)
    fake_ccache = tmp_path / "fake-bin"
    fake_ccache.mkdir()
    (fake_ccache / "ccache").write_text("#!/bin/sh\n")
    (fake_ccache / "ccache").chmod(0o755)
    (tmp_path / "src").mkdir(exist_ok=True)
    return pip_environment(tmp_path, root, nvcc_help=NVCC_13_HELP, SSM_CONDA_CCACHE_DIR=str(tmp_path / "cache"),
                           SRC_DIR=str(tmp_path / "src"), CXX="g++")


def cached_nvcc_command(tmp_path: Path) -> str:
    """PYTORCH_NVCC as the build script sets it with the compiler cache on."""
    return cached_environment(tmp_path)["PYTORCH_NVCC"]


def test_the_cache_hands_the_compiler_the_paths_it_sees_without_it(tmp_path):
    """No CCACHE_BASEDIR: ccache would rewrite the paths under it to relative ones, which end up in __FILE__, and a
    build with the cache would differ from one without (docs/reproducible.md)."""
    environ = cached_environment(tmp_path)
    assert environ["CCACHE_DIR"] == str(tmp_path / "cache") and "CCACHE_BASEDIR" not in environ


def test_the_cache_wraps_the_compiler_inside_the_build_folder(tmp_path, monkeypatch):
    """ccache stands in for the C++ compiler under its name, from a folder beside the work folder: it goes with the
    build, and nothing is left in $TMPDIR (a folder per build, before)."""
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    environ = cached_environment(tmp_path)
    assert environ["CXX"] == str(tmp_path / "ccache-bin" / "g++")
    assert (tmp_path / "ccache-bin" / "g++").resolve() == (tmp_path / "fake-bin" / "ccache").resolve()
    assert list(tmpdir.iterdir()) == []


def test_compression_flag_is_on_the_cached_command_line(tmp_path):
    """With the compiler cache the flag stays on the command line ccache hashes: objects built
    without compression are never reused for a compressed build. conda-forge's libtorch has torch's
    headers in $PREFIX/include, whose path names no Python: nothing more on the line."""
    assert cached_nvcc_command(tmp_path) == "ccache nvcc --compress-mode=size"


def test_headers_in_site_packages_are_reached_through_a_link_that_names_no_python(tmp_path):
    """PyPI's layout (torch/include in the Python-versioned site-packages): nvcc finds the headers
    first through a link beside the work directory, so Pythons share the CUDA objects."""
    (tmp_path / "torch" / "include" / "torch").mkdir(parents=True)
    command = cached_nvcc_command(tmp_path)
    link = tmp_path / "torch-include"
    assert command == f"ccache nvcc --compress-mode=size -I{link} -I{link}/torch/csrc/api/include"


def test_times_are_the_sources_and_nvcc_names_its_temporary_files_after_the_object(tmp_path):
    """Reproducible builds (docs/reproducible.md): SOURCE_DATE_EPOCH is the sdist's PKG-INFO time, not rattler-build's
    build time, and is left for `ssm-conda build` beside the work folder; nvcc's temporary names are the object's;
    the build folder is mapped out of __FILE__ with the compiler cache off too."""
    help_text = NVCC_13_HELP + "\n--objdir-as-tempdir   (-objtemp)\n--frandom-seed <seed>   (-frandom-seed)"
    recorded = pip_environment(tmp_path, None, nvcc_help=help_text)
    assert recorded["SOURCE_DATE_EPOCH"] == str(SDIST_TIME)
    assert (tmp_path / "source-date-epoch").read_text() == f"{SDIST_TIME}\n"
    assert recorded["PYTORCH_NVCC"] == "nvcc --compress-mode=size --objdir-as-tempdir --frandom-seed=causal-conv1d"
    assert recorded["NVCC_APPEND_FLAGS"].split() == [f"-Xcompiler=-fmacro-prefix-map={tmp_path}/="]
