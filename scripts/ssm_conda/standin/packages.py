"""The stand-in packages, in build order, and the rattler-build recipe each is built from.

Each stand-in is a template in recipes/ plus a context (versions, paths on this machine) and the
lists a template cannot compute itself (run requirements from wheel metadata, entry points).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ssm_conda.standin.catalog import BINARY_WHEELS, NOARCH_WHEELS, NVIDIA_LIBS, TOOL_WHEELS
from ssm_conda.standin.host import Machine
from ssm_conda.standin.wheels import Wheel, conda_run_requirements, conda_specifier, read_metadata

RECIPES_DIR = Path(__file__).resolve().parent / "recipes"


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


def machine_standins(m: Machine) -> list[StandIn]:
    """The stand-ins repacked from the machine itself: python, compilers, glibc, the CUDA toolkit."""
    cuda = {"cuda_mm": m.cuda_mm, "cuda_major": m.cuda_major}
    gcc_major = m.gcc_version.split(".")[0]
    return [
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


def wheel_standins(m: Machine) -> list[StandIn]:
    """The stand-ins repacked from wheels: tools, pure-Python and binary packages, NVIDIA's libraries."""
    out = [StandIn(tool, "tool_wheel.yaml", {**wheel_context(m.wheels[tool], tool), "license": license})
           for tool, (_pypi, license) in TOOL_WHEELS.items()]
    for conda, _pypi, _constraint in NOARCH_WHEELS:
        wheel = m.wheels[conda]
        meta = read_metadata(wheel.path)
        out.append(StandIn(conda, "noarch_wheel.yaml", wheel_context(wheel, conda),
                           run=conda_run_requirements(meta.requires, meta.requires_python, m.target),
                           host=["python"] if conda == "pip" else None, entry_points=meta.console_scripts))
    for conda in [conda for conda, _pypi, _constraint in BINARY_WHEELS] + list(m.companions):
        wheel = m.wheels[conda]
        # python_abi, not Requires-Python, ties a binary package to its Python
        out.append(StandIn(conda, "binary_wheel.yaml", wheel_context(wheel, conda),
                           run=conda_run_requirements(read_metadata(wheel.path).requires, None, m.target)))
    for conda, _pypi, deps in NVIDIA_LIBS:
        out.append(StandIn(conda, "nvidia_lib.yaml", {**wheel_context(m.nvidia[conda], conda),
                                                      "cuda_mm": m.cuda_mm, "cuda_major": m.cuda_major},
                           run=[f"cuda-version >={m.cuda_major},<{int(m.cuda_major) + 1}", *deps]))
    return out


def pytorch_standin(m: Machine) -> StandIn:
    major, minor = (int(x) for x in m.torch_version.split(".")[:2])
    context = {
        "version": m.torch_version, "py_ver": m.py_ver, "torch_src": str(m.torch_src),
        "torch_src_kind": m.torch_kind, "torch_src_name": m.torch_src.name,
        "version_xy_next": f"{major}.{minor + 1}.0a0", "cuda_mm": m.cuda_mm, "cuda_major": m.cuda_major,
    }
    base = yaml.safe_load((RECIPES_DIR / "pytorch.yaml").read_text())["requirements"]["run"]
    companions = [f"{name} {conda_specifier(pin)}".strip() for name, pin in m.companions.items()]
    return StandIn("pytorch", "pytorch.yaml", context,
                   run=[*base, "cuda-cudart", *[conda for conda, _, _ in NVIDIA_LIBS], *companions])


def standins(m: Machine) -> list[StandIn]:
    """Every stand-in package, in build order (each solves against the ones before it)."""
    return [*machine_standins(m), *wheel_standins(m), pytorch_standin(m)]


def wheel_context(wheel: Wheel, name: str) -> dict[str, Any]:
    return {"name": name, "version": wheel.version, "wheel": str(wheel.path), "wheel_name": wheel.path.name,
            "lib_files": " ".join(wheel.lib_files)}


class _Literal(str):
    """A string yaml writes as a | block (build scripts stay readable in the written recipe)."""


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
