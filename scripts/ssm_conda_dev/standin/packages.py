"""The stand-in packages, in build order: each a template in recipes/, a context (versions, paths on
this machine) and the lists a template cannot compute itself (run requirements, entry points)."""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from ssm_conda_dev.standin import debian
from ssm_conda_dev.standin.catalog import BINARY_WHEELS, NOARCH_WHEELS, NVIDIA_DEPS, NVIDIA_LIBS, PYTHON_MIN, TOOL_WHEELS
from ssm_conda_dev.standin.cuda import CUDA_PACKAGES, TARGETS, CudaPackage, cuda_packages
from ssm_conda_dev.standin.debian import DebianPackages
from ssm_conda_dev.standin.host import Machine, TargetWheels
from ssm_conda_dev.standin.wheels import TargetPython, Wheel, conda_run_requirements, noarch_python, read_metadata

# Every compute capability NVIDIA has shipped from Maxwell on (CUDA's programming guide; 10.1 is
# Thor's number before CUDA 13 renamed it 11.0). conda-forge's cuda-arch metapackage has one version
# for each, so that any machine's __cuda_arch finds its own.
COMPUTE_CAPABILITIES = ("5.0", "5.2", "5.3", "6.0", "6.1", "6.2", "7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.8",
                        "8.9", "9.0", "10.0", "10.1", "10.3", "11.0", "12.0", "12.1")

RECIPES_DIR = Path(__file__).resolve().parent / "recipes"


@dataclass
class StandIn:
    """One stand-in package: a recipe template, its context and list injections."""

    key: str  # unique: the conda name, or name-version where one name has several stand-ins
    template: str
    context: dict[str, Any]
    run: list[str] | None = None
    host: list[str] | None = None
    entry_points: list[str] | None = None
    run_exports_strong: list[str] | None = None
    name: str | None = None  # the conda name where it is not the key
    run_exports_weak: list[str] | None = None
    constrains: list[str] | None = None
    # context keys left out of the recipe digest and the build string's hash (write_undigested): a
    # package shared by every Python (libtorch) is built once, from whichever Python's wheel came
    # first, and reused by the others
    undigested: tuple[str, ...] = ()
    platform: str = "linux-64"  # the subdir a package that is not noarch is built for

    @property
    def conda_name(self) -> str:
        return self.name or self.key


def standins(m: Machine) -> list[StandIn]:
    """Every stand-in package, in build order (each solves against the ones before it): the machine's
    own python, compilers, glibc and CUDA toolkit; then wheels: tools, pure-Python and binary
    packages, NVIDIA's libraries; pytorch last."""
    cuda, gcc, py_ver = cuda_context(m), m.gcc_version, m.target.py_ver
    out = [
        StandIn("python", "python.yaml", {"version": m.target.python_full_version, "src_prefix": str(m.python_prefix),
                                          "py_ver": py_ver}),
        StandIn("python_abi", "python_abi.yaml", {"py_ver": py_ver}),
        *abi3_standins(m.target),
        StandIn("libgcc", "runtime_lib.yaml", {"name": "libgcc", "version": gcc, "libs": " ".join(m.libgcc_libs)}),
        StandIn("libstdcxx", "runtime_lib.yaml", {"name": "libstdcxx", "version": gcc, "libs": " ".join(m.libstdcxx_libs)},
                run=[f"libgcc =={gcc}"]),
        StandIn("sysroot_linux-64", "sysroot_linux-64.yaml", {"version": m.target.glibc, "glibc_libs": " ".join(m.glibc_libs)}),
        *compiler_standins("linux-64", gcc, f"cc={m.cc} gcc={m.cc} cpp={m.cc.replace('gcc', 'cpp')}",
                           f"c++={m.cxx} g++={m.cxx}"),
        StandIn("cuda-version", "cuda-version.yaml", dict(cuda)),
        *(StandIn(f"cuda-arch-{cap}", "cuda-arch.yaml", {"capability": cap}, name="cuda-arch") for cap in COMPUTE_CAPABILITIES),
        *(cuda_standin(m, package) for package in CUDA_PACKAGES),
        nvcc_standin(m, [f"cuda-nvcc-impl {m.nvcc_version}.*"]),
    ]
    out += [StandIn(tool, "tool_wheel.yaml", {**wheel_context(m.wheels[tool], tool), "license": license})
            for tool, (_pypi, license) in TOOL_WHEELS.items()]
    for conda in (name for name in NOARCH_WHEELS if name in m.wheels):  # PYTHON_FLOORS leaves some out
        meta = read_metadata(m.wheels[conda].path)
        out.append(StandIn(conda, "noarch_wheel.yaml", wheel_context(m.wheels[conda], conda),
                           run=conda_run_requirements(meta.requires, meta.requires_python,
                                                      noarch_python(meta.requires_python, PYTHON_MIN)),
                           host=["python"] if conda == "pip" else None, entry_points=meta.console_scripts))
    return [*out, *wheel_standins(m), *torch_standins(m)]


def abi3_standins(target: TargetPython) -> list[StandIn]:
    """conda-forge's python-abi3 (what an abi3 recipe's host asks for) for this Python, the cpython and
    python-gil outputs of its python, and _python_abi3_support, which ties them together."""
    major, minor = (int(part) for part in target.py_ver.split("."))
    version = {"version": target.python_full_version, "py_ver": target.py_ver}
    return [StandIn("python-abi3", "python-abi3.yaml", {"py_ver": target.py_ver, "version_hex": f"0x{major:02x}{minor:02x}0000"}),
            StandIn("_python_abi3_support", "python_abi3_support.yaml", {}),
            StandIn("cpython", "cpython.yaml", {"name": "cpython", **version}),
            StandIn("python-gil", "cpython.yaml", {"name": "python-gil", **version})]


def aarch64_standins(m: TargetWheels) -> list[StandIn]:
    """A cross build's linux-aarch64 side, from `m` (host.target_wheels): the sbsa CUDA packages, the
    build machine's cuda-nvcc_linux-aarch64, the binary wheels, NVIDIA's libraries and pytorch."""
    return [*(cuda_standin(m, package) for package in cuda_packages(m.target.platform)),
            StandIn("arm-variant", "arm-variant.yaml", {"variant": "sbsa"}),
            nvcc_standin(m, ["arm-variant * sbsa"]), *wheel_standins(m), *torch_standins(m)]


def nvcc_standin(m: TargetWheels, run: list[str]) -> StandIn:
    """cuda-nvcc_<target>, a package of the build machine: the activation over the target's headers."""
    sub = m.target.platform
    glibc = ".".join(m.target.glibc.split(".")[:2])
    return StandIn(f"cuda-nvcc_{sub}", "cuda-nvcc.yaml",
                   {"version": m.nvcc_version, "target": sub, "target_dir": TARGETS[sub], **cuda_context(m)},
                   run=[f"cuda-nvcc-dev_{sub} {m.nvcc_version}.*", f"cuda-cudart-dev_{sub} {m.cuda_mm}.*",
                        f"cuda-nvcc-tools {m.nvcc_version}.*", *run, f"sysroot_{sub} >={glibc},<3.0a0"])


def wheel_standins(m: TargetWheels) -> list[StandIn]:
    """The binary wheels (python_abi, not Requires-Python, ties one to its Python) and NVIDIA's libraries."""
    binary = [StandIn(conda, "binary_wheel.yaml", {**wheel_context(m.wheels[conda], conda), "cross_pip_args": m.cross_pip_args},
                      run=conda_run_requirements(read_metadata(m.wheels[conda].path).requires, None, m.target),
                      platform=m.target.platform)
              for conda in (*BINARY_WHEELS, *m.companions)]
    return binary + [StandIn(conda, "nvidia_lib.yaml", {**wheel_context(m.nvidia[conda], conda), **cuda_context(m)},
                             run=[f"cuda-version >={m.cuda_major},<{int(m.cuda_major) + 1}", *NVIDIA_DEPS.get(conda, ())],
                             platform=m.target.platform)
                     for conda in NVIDIA_LIBS]


# conda-forge's compiler activation per target: the tool prefix, and the -march flags of its CFLAGS
TOOLCHAINS = {"linux-64": ("x86_64-conda-linux-gnu", "-march=nocona -mtune=haswell"),
              "linux-aarch64": ("aarch64-conda-linux-gnu", "")}


def compiler_standins(target: str, version: str, c_tools: str = "", cxx_tools: str = "",
                      run: tuple[str, ...] = ()) -> list[StandIn]:
    """gcc_<target> and gxx_<target>: activation (and, natively, wrappers of the machine's gcc);
    their run_exports name the target's libgcc and libstdcxx, as conda-forge's do."""
    host, arch_flags = TOOLCHAINS[target]
    major = version.split(".")[0]
    context = {"version": version, "host": host, "arch_flags": arch_flags}
    return [
        StandIn(f"gcc_{target}", "compiler.yaml", {**context, "name": f"gcc_{target}", "activate": "activate-gcc.sh",
                                                   "tools": c_tools},
                run=list(run) or None, run_exports_strong=[f"libgcc >={major}"]),
        StandIn(f"gxx_{target}", "compiler.yaml", {**context, "name": f"gxx_{target}", "activate": "activate-gxx.sh",
                                                   "tools": cxx_tools},
                run=[f"gcc_{target} =={version}"], run_exports_strong=[f"libstdcxx >={major}"]),
    ]


def cross_standins(debs: DebianPackages, crossenv: Wheel, target_python: TargetPython) -> list[StandIn]:
    """What building for linux-aarch64 on linux-64 adds: Debian's cross gcc, aarch64 glibc and CPython
    as conda-forge's sysroot, compiler, runtime and python packages (standin/debian.py), and
    cross-python with the crossenv it runs."""
    gcc, target = debs.gcc_version, "linux-aarch64"
    lib = "usr/aarch64-linux-gnu/lib"
    py_ver = debs.py_ver
    return [
        StandIn("sysroot_linux-aarch64", "sysroot_linux-aarch64.yaml",
                {"version": debs.glibc_version, "deb_dirs": " ".join(map(str, debs.dirs(debian.SYSROOT)))}),
        StandIn("gcc_impl_linux-aarch64", "gcc_impl_linux-aarch64.yaml",
                {"version": gcc, "gcc_major": debian.GCC_MAJOR, "deb_dirs": " ".join(map(str, debs.dirs(debian.CROSS_GCC)))}),
        *compiler_standins(target, gcc, run=(f"gcc_impl_linux-aarch64 =={gcc}",)),
        StandIn("libgcc-aarch64", "runtime_lib.yaml", {"name": "libgcc", "version": gcc,
                "libs": str(debs.root / "libgcc-s1-arm64-cross" / lib / "libgcc_s.so.1")}, name="libgcc", platform=target),
        StandIn("libstdcxx-aarch64", "runtime_lib.yaml", {"name": "libstdcxx", "version": gcc,
                "libs": str(debs.root / "libstdc++6-arm64-cross" / lib / "libstdc++.so.6")},
                run=[f"libgcc =={gcc}"], name="libstdcxx", platform=target),
        StandIn("python-aarch64", "python_debian.yaml", {"version": debs.python_version, "py_ver": py_ver,
                "triplet": "aarch64-linux-gnu", "deb_dirs": " ".join(map(str, debs.dirs(debian.PYTHON))),
                "build_python": sys.executable},  # runs debian_python.py
                name="python", platform=target, undigested=("build_python",)),
        StandIn("python_abi", "python_abi.yaml", {"py_ver": py_ver}),
        # cpython and python-gil of Debian's CPython (noarch, but pinned to its X.Y.Z): what an abi3 recipe's host needs
        *(replace(standin, key=f"{standin.key}-aarch64", name=standin.conda_name)
          for standin in abi3_standins(TargetPython(py_ver, debs.glibc_version, debs.python_version, target))
          if standin.key in ("cpython", "python-gil")),
        StandIn("crossenv", "noarch_wheel.yaml", wheel_context(crossenv, "crossenv"),
                run=conda_run_requirements(read_metadata(crossenv.path).requires,
                                           read_metadata(crossenv.path).requires_python, target_python)),
        StandIn(f"cross-python_{target}", "cross-python.yaml",
                {"target": target, "py_ver": py_ver, "host": TOOLCHAINS[target][0],
                 "sysconfigdata_name": f"_sysconfigdata_{TOOLCHAINS[target][0].replace('-', '_')}"}),
    ]


def cuda_standin(m: TargetWheels, package: CudaPackage) -> StandIn:
    """One of conda-forge's CUDA packages from its toolkit wheel (standin/cuda.py)."""
    wheel = m.toolkit[package.wheel or package.version_from or ""]
    names = {"v": wheel.version, "cuda": m.cuda_mm, "cuda_major": m.cuda_major,
             "cuda_major_next": str(int(m.cuda_major) + 1)}
    minor_next = f"{m.cuda_major}.{int(m.cuda_mm.split('.')[1]) + 1}.0a0"
    context = {"name": package.name, "version": wheel.version, "wheel": str(wheel.path) if package.wheel else "",
               "wheel_name": wheel.path.name,
               "copy": " ".join(f"{a}=>{b}" for a, b in package.copy.items()).format(**names),
               "links": " ".join(f"{a}->{b}" for a, b in package.links.items()).format(**names),
               "recipe_files": " ".join(f"{a}=>{b}" for a, b in package.recipe_files.items())}
    return StandIn(package.name, "cuda_target.yaml" if package.noarch else "cuda_package.yaml", context,
                   run=[*(r.format(**names) for r in package.run), f"cuda-version >={m.cuda_mm},<{minor_next}"],
                   constrains=list(package.constrains),
                   run_exports_weak=[r.format(**names) for r in package.run_exports_weak],
                   run_exports_strong=[r.format(**names) for r in package.run_exports_strong], platform=m.target.platform)


def torch_standins(m: TargetWheels) -> list[StandIn]:
    """libtorch (the C++ libraries and headers, shared by every Python) and pytorch, as conda-forge splits them."""
    major, minor = (int(x) for x in m.torch_version.split(".")[:2])
    torch = {"version": m.torch_version, "py_ver": m.target.py_ver, "torch_src": str(m.torch_src), "torch_src_kind": m.torch_kind,
             "torch_src_name": m.torch_src.name, "version_xy_next": f"{major}.{minor + 1}.0a0", **cuda_context(m),
             "cross_pip_args": m.cross_pip_args, "cuda_target": TARGETS[m.target.platform].removeprefix("targets/")}
    # pinned to the build repacked here, as conda-forge's pytorch pins the triton it was built with (torch 2.14's
    # wheel asks for triton ~=3.8.0, 2.13's for ==3.7.0)
    companions = [f"{name} =={m.wheels[name].version}" for name in m.companions]
    base = yaml.safe_load((RECIPES_DIR / "pytorch.yaml").read_text())["requirements"]["run"]
    libtorch = StandIn("libtorch", "libtorch.yaml",
                       {k: v for k, v in torch.items() if k not in ("py_ver", "cross_pip_args", "cuda_target")},
                       run=[f"cuda-version >={m.cuda_major},<{int(m.cuda_major) + 1}", "libgcc", "libstdcxx",
                            "cuda-cudart", *NVIDIA_LIBS],
                       undigested=("torch_src", "torch_src_kind", "torch_src_name"), platform=m.target.platform)
    return [libtorch, StandIn("pytorch", "pytorch.yaml", torch, run=[*base, *companions], platform=m.target.platform)]


def cuda_context(m: TargetWheels) -> dict[str, str]:
    return {"cuda_mm": m.cuda_mm, "cuda_major": m.cuda_major}


def wheel_context(wheel: Wheel, name: str) -> dict[str, Any]:
    return {"name": name, "version": wheel.version, "wheel": str(wheel.path), "wheel_name": wheel.path.name,
            "lib_files": " ".join(wheel.lib_files)}


class _Literal(str):
    """A string yaml writes as a | block (build scripts stay readable in the written recipe)."""


yaml.add_representer(_Literal, lambda dumper, data: dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|"),
                     Dumper=yaml.SafeDumper)


def write_recipe(standin: StandIn, directory: Path) -> Path:
    """The recipe of one stand-in, with its lists filled in, plus the helper files it copies."""
    recipe = yaml.safe_load((RECIPES_DIR / standin.template).read_text())
    build, requirements = recipe.setdefault("build", {}), recipe.setdefault("requirements", {})
    requirements.update({key: value for key, value in (("run", standin.run), ("host", standin.host)) if value is not None})
    if standin.entry_points is not None and build.get("noarch") == "python":
        build.setdefault("python", {})["entry_points"] = standin.entry_points
    if standin.run_exports_strong is not None:
        requirements.setdefault("run_exports", {})["strong"] = standin.run_exports_strong
    if standin.run_exports_weak is not None:
        requirements.setdefault("run_exports", {})["weak"] = standin.run_exports_weak
    if standin.constrains is not None:
        requirements["run_constraints"] = standin.constrains
    for key in ("run", "run_constraints"):
        if requirements.get(key) == []:
            del requirements[key]
    exports = requirements.get("run_exports")
    if isinstance(exports, dict):
        requirements["run_exports"] = {kind: specs for kind, specs in exports.items() if specs}
        if not requirements["run_exports"]:
            del requirements["run_exports"]
    script = build.get("script")
    if isinstance(script, dict) and "content" in script:
        script["content"] = _Literal(script["content"])
    directory.mkdir(parents=True, exist_ok=True)
    for helper in RECIPES_DIR.iterdir():  # files only: a plain install byte-compiles the helpers into __pycache__/
        if helper.is_file() and helper.suffix != ".yaml":
            shutil.copy2(helper, directory / helper.name)
    path = directory / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False, width=120))
    return path


def write_undigested(standin: StandIn, recipe_path: Path) -> None:
    """Put the stand-in's undigested context in its recipe's own context: section, once its digest is
    taken. rattler-build hashes every extra_context value a recipe uses into the build string (the h
    of libtorch's cuda130_generic_h..._202), never its own context's: a package shared by every
    Python keeps its file name whichever Python's wheel it was built from."""
    if standin.undigested:
        context = {key: str(standin.context[key]) for key in standin.undigested}
        recipe_path.write_text(yaml.safe_dump({"context": context}, width=120) + recipe_path.read_text())
