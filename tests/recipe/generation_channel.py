"""A channel index for solver tests: every rendered variant of the recipes as the repodata record
its package gets, with the stand-in's cuda-arch packages and empty packages for the rest.

A record is what rattler-build writes into index.json: the rendered run requirements, plus
`cuda-arch >=X` from the run_export of the host's cuda-arch (read from the stand-in's cuda-arch
recipe), plus `<name>-p-0` in track_features for down_prioritize_variant: 1. The end-to-end test
checks that a package really built gets the record this module derives for it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ssm_conda.matrix import PlannedVariant
from ssm_conda_dev.solving import solve_for_machine
from ssm_conda_dev.standin.packages import COMPUTE_CAPABILITIES

# Everything else the recipes' run requirements name, at a version each requirement accepts.
OTHERS = {"python": ("3.12.0", "0"), "pytorch": ("2.13.0", "cuda130_0"), "packaging": ("25.0", "0"),
          "einops": ("0.8.1", "0"), "setuptools": ("80.9.0", "0"), "transformers": ("5.25.0", "0"),
          "triton": ("3.5.0", "0"), "cuda-cudart_linux-64": ("13.0.96", "0"),
          "pip": ("25.2", "0")}  # conda adds pip to every python it installs


@functools.cache  # every variant of a generation asks for the same capability's
def cuda_arch_requirements(capability: str) -> dict[str, Any]:
    """The stand-in's cuda-arch recipe for one capability, rendered: run_constraints and run_exports."""
    from rattler_build import PlatformConfig, RenderConfig, Stage0Recipe, VariantConfig
    from ssm_conda_dev.standin.packages import RECIPES_DIR

    render = RenderConfig(PlatformConfig(target_platform="linux-64"), extra_context={"capability": capability})
    return Stage0Recipe.from_file(RECIPES_DIR / "cuda-arch.yaml").render(VariantConfig({}), render)[0].recipe.to_dict()[
        "requirements"]


def cuda_arch_records() -> list[dict[str, Any]]:
    return [{"name": "cuda-arch", "version": cap, "build": "h0_0", "build_number": 0, "subdir": "noarch",
             "noarch": "generic", "depends": [], "constrains": cuda_arch_requirements(cap)["run_constraints"]}
            for cap in COMPUTE_CAPABILITIES]


def package_record(variant: PlannedVariant) -> dict[str, Any]:
    recipe = variant.rendered.recipe.to_dict()
    depends = list(recipe["requirements"]["run"])
    for host in recipe["requirements"]["host"]:
        if host.startswith("cuda-arch =="):
            exports = cuda_arch_requirements(host.removeprefix("cuda-arch =="))["run_exports"]["weak"]
            depends += [d for d in exports if d not in depends]
    name = variant.package
    record = {"name": name, "version": str(variant.rendered.recipe.package.version), "build": variant.build_string,
              "build_number": 0, "subdir": "linux-64", "depends": sorted(depends), "constrains": []}
    if recipe["build"].get("variant", {}).get("down_prioritize_variant", 0):
        record["track_features"] = f"{name}-p-0"
    return record


def write_channel(directory: Path, variants: Iterable[PlannedVariant]) -> str:
    """repodata.json for linux-64 and noarch under directory; returns the channel's file:// URL."""
    ours = [package_record(v) for v in variants]
    others = [{"name": n, "version": v, "build": b, "build_number": 0, "subdir": "noarch", "depends": []}
              for n, (v, b) in OTHERS.items()]
    for subdir, records in (("linux-64", ours), ("noarch", [*cuda_arch_records(), *others])):
        (directory / subdir).mkdir(parents=True, exist_ok=True)
        packages = {f"{r['name']}-{r['version']}-{r['build']}.conda": r for r in records}
        (directory / subdir / "repodata.json").write_text(
            json.dumps({"info": {"subdir": subdir}, "packages": {}, "packages.conda": packages}))
    return directory.as_uri()


def picked(channel: str, package: str, cuda_arch: str | None) -> dict[str, str]:
    """name -> GPU generation of what pixi's solver (py-rattler) installs for `package` on a CUDA 13.0 machine
    whose oldest GPU is `cuda_arch` (None: no __cuda_arch); raises its SolverError."""
    records = solve_for_machine([channel], [package], cuda="13.0", cuda_arch=cuda_arch, platform="linux-64")
    return {r.name.normalized: str(r.build).split("_")[3] for r in records if r.name.normalized in ("causal-conv1d", "mamba-ssm")}
