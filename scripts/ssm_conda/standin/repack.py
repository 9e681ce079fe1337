"""Build the stand-in channel: each stand-in rendered, reused or built, with a line of progress each.

The channel root also gets standin-variants.yaml: the machine's gcc and glibc versions, which the
build merges over the variant file (see ssm_conda.build.standin_overrides).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from rattler_build.progress import ProgressCallback

from ssm_conda.console import Outcome, PipelineError, human_duration, human_size
from ssm_conda.standin.host import Machine
from ssm_conda.standin.packages import standins, write_recipe
from ssm_conda.standin.reuse import (
    TARGET_PLATFORM,
    channel_pythons,
    clean_build_dirs,
    existing_package,
    is_stamped,
    package_path,
    prune_channel,
    recipe_digest,
    write_stamp,
)

VARIANTS_FILE_NAME = "standin-variants.yaml"
# zstd level 1: the big CUDA and torch packages compress in seconds, at ~10% more size than the
# default level.
PACKAGE_FORMAT = "conda:1"
LOGS_DIR = ".logs"  # a failed build's log, outside the served subdirs

Log = Callable[[str], None]


class BuildLog(ProgressCallback):
    """rattler-build's progress callback for one stand-in: its log kept for a failure's message,
    printed as it comes with --verbose."""

    def __init__(self, verbose: bool, log: Log) -> None:
        self.verbose, self.log, self.lines = verbose, log, list[str]()

    def on_log(self, event) -> None:  # noqa: ANN001 (rattler_build event types)
        message = event.message.rstrip()
        self.lines.append(message)
        if self.verbose:
            self.log(f"    {message}")

    def on_build_step(self, event) -> None:  # noqa: ANN001
        if self.verbose:
            self.log(f"    {event.message or event.step_name}")

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(self.lines) + "\n")
        return path


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def build_channel(m: Machine, channel: Path, threads: int, log: Log, rebuild: frozenset[str] = frozenset(),
                  verbose: bool = False) -> list[Outcome]:
    """Reuse or build every stand-in of `m` into `channel`; prune what no stand-in builds any more."""
    from rattler_build import PlatformConfig, RenderConfig, Stage0Recipe, ToolConfiguration, VariantConfig

    channel.mkdir(parents=True, exist_ok=True)
    (channel / "noarch").mkdir(exist_ok=True)
    tool = ToolConfiguration(compression_threads=threads, test_strategy="skip")
    variants = VariantConfig.from_yaml(yaml.safe_dump({"python": [m.py_ver]}))
    outcomes, kept = [], set()
    todo = standins(m)
    with tempfile.TemporaryDirectory(prefix="standin-recipes-") as tmp:
        for number, standin in enumerate(todo, 1):
            step = f"[{number}/{len(todo)}] {standin.key}"
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
            path = package_path(channel, subdir, name, version, build)
            outcome = Outcome(f"{name} {version}", build, detail=subdir)
            digest = recipe_digest(recipe_path, standin.context)
            changed = path.exists() and not is_stamped(path, digest)
            if name in rebuild or "all" in rebuild or changed:
                path.unlink(missing_ok=True)
            found = existing_package(channel, subdir, name, version, build)
            if found is None:
                log(f"{step} {version} {build}: building{' (its recipe changed)' if changed else ''} ...")
                start = time.monotonic()
                found = build_one(rendered, channel, tool, path, BuildLog(verbose, log))
                write_stamp(found, digest)
                outcome.result, outcome.seconds = "rebuilt" if changed else "built", time.monotonic() - start
                log(f"{step} {version} {outcome.result} in {human_duration(outcome.seconds)} "
                    f"({human_size(found.stat().st_size)})")
            else:
                outcome.result = "reused"
                if verbose:
                    log(f"{step} {version} reused ({human_size(found.stat().st_size)})")
            outcome.size = found.stat().st_size
            outcomes.append(outcome)
            kept.add(found)
    clean_build_dirs(channel)
    prune_channel(channel, kept, m.py_ver, log)
    return outcomes


def build_one(rendered, channel: Path, tool, path: Path, build_log: BuildLog) -> Path:  # noqa: ANN001
    """Build one rendered stand-in into the channel; the package it wrote."""
    name = path.name.removesuffix(".conda")
    try:
        rendered.run_build(tool_config=tool, output_dir=channel, channels=[channel.as_uri()],
                           package_format=PACKAGE_FORMAT, progress_callback=build_log)
    except Exception as exc:  # noqa: BLE001
        clean_build_dirs(channel)
        saved = build_log.save(channel / LOGS_DIR / f"{name}.log")
        raise PipelineError(f"building the {name} stand-in failed: {first_line(exc)} (log: {saved})") from None
    found = existing_package(channel, path.parent.name, *name.rsplit("-", 2))
    if found is None:
        raise PipelineError(f"rattler-build reported success but {path.parent.name}/{path.name} is missing")
    return found


def variant_overrides(m: Machine) -> dict[str, list[str]]:
    gcc_major = m.gcc_version.split(".")[0]
    return {
        "c_compiler_version": [gcc_major],
        "cxx_compiler_version": [gcc_major],
        "c_stdlib_version": [".".join(m.glibc_version.split(".")[:2])],
    }


def write_variants_file(channel: Path, m: Machine) -> Path:
    path = channel / VARIANTS_FILE_NAME
    header = (
        "# Written by `ssm-conda standin`: this stand-in channel's compilers and glibc are the\n"
        f"# machine's (gcc {m.gcc_version}, glibc {m.glibc_version}), not conda-forge's. Merge over the variant\n"
        f"# file when building against it. It holds python {', '.join(channel_pythons(channel))}, "
        f"pytorch {m.torch_version}\n# (CUDA {m.cuda_mm}) only.\n"
    )
    tmp = path.with_suffix(".tmp")
    tmp.write_text(header + yaml.safe_dump(variant_overrides(m), sort_keys=False, default_flow_style=None))
    tmp.replace(path)
    return path

