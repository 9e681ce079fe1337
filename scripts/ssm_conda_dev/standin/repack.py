"""Build the stand-in channel: each stand-in rendered, reused or built, with a line of progress each;
standin-variants.yaml at its root (the machine's gcc and glibc, see ssm_conda.matrix.standin_overrides)."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from rattler_build.progress import ProgressCallback
from ssm_conda.console import Outcome, PipelineError, human_duration, human_size

from ssm_conda_dev.standin import reuse
from ssm_conda_dev.standin.host import Machine
from ssm_conda_dev.standin.packages import StandIn, write_recipe, write_undigested

VARIANTS_FILE_NAME = "standin-variants.yaml"
# zstd level 1: the big CUDA and torch packages compress in seconds, at ~10% more size than the default.
PACKAGE_FORMAT = "conda:1"
LOGS_DIR = ".logs"  # a failed build's log, outside the served subdirs

Log = Callable[[str], None]


class BuildLog(ProgressCallback):
    """rattler-build's progress callback for one stand-in: its log kept for a failure's message,
    printed as it comes with --verbose."""

    def __init__(self, verbose: bool, log: Log) -> None:
        self.verbose, self.log, self.lines = verbose, log, list[str]()

    def on_log(self, event) -> None:  # noqa: ANN001 (rattler_build event types)
        self.lines.append(event.message.rstrip())
        if self.verbose:
            self.log(f"    {self.lines[-1]}")

    def on_build_step(self, event) -> None:  # noqa: ANN001
        if self.verbose:
            self.log(f"    {event.message or event.step_name}")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def build_channel(todo: list[StandIn], py_ver: str, channel: Path, threads: int, log: Log,
                  rebuild: frozenset[str] = frozenset(), verbose: bool = False) -> list[Outcome]:
    """Reuse or build every stand-in of `todo` (rendered for Python `py_ver`) into `channel`; remove
    the older builds of what it built."""
    from rattler_build import PlatformConfig, RenderConfig, Stage0Recipe, ToolConfiguration, VariantConfig

    (channel / "noarch").mkdir(parents=True, exist_ok=True)
    # conda-forge's noarch CUDA packages (cuda-cudart_linux-64, ...) hold symlinks, as on linux only
    tool = ToolConfiguration(compression_threads=threads, test_strategy="skip", allow_symlinks_on_windows=True)
    variants = VariantConfig.from_yaml(yaml.safe_dump({"python": [py_ver]} if py_ver else {}))
    outcomes, kept = [], set()
    with tempfile.TemporaryDirectory(prefix="standin-recipes-") as tmp:
        for number, standin in enumerate(todo, 1):
            recipe_path = write_recipe(standin, Path(tmp) / standin.key)
            digested = {k: v for k, v in standin.context.items() if k not in standin.undigested}
            digest = reuse.recipe_digest(recipe_path, digested)
            write_undigested(standin, recipe_path)
            render = RenderConfig(PlatformConfig(target_platform=standin.platform),
                                  extra_context={k: str(v) for k, v in digested.items()})
            try:
                rendered = Stage0Recipe.from_file(recipe_path).render(variants, render)[0]
            except Exception as exc:  # noqa: BLE001 - rattler-build raises its own types
                raise PipelineError(f"rendering the {standin.key} stand-in failed: {first_line(exc)}") from None
            package, build = rendered.recipe.package, rendered.recipe.build
            name, version, subdir = package.name, str(package.version), "noarch" if build.noarch else standin.platform
            path = reuse.package_path(channel, subdir, name, version, build.string)
            step = f"[{number}/{len(todo)}] {standin.conda_name} {version}"
            outcome = Outcome(f"{name} {version}", build.string, path=path, detail=subdir)
            changed = path.exists() and not reuse.is_stamped(path, digest)
            if name in rebuild or "all" in rebuild or changed:
                path.unlink(missing_ok=True)
            if reuse.existing_package(channel, subdir, name, version, build.string):
                outcome.result = "reused"
                if verbose:
                    log(f"{step} reused ({human_size(path.stat().st_size)})")
            else:
                log(f"{step} {build.string}: building{' (its recipe changed)' if changed else ''} ...")
                start = time.monotonic()
                build_one(rendered, channel, tool, path, BuildLog(verbose, log))
                reuse.write_stamp(path, digest)
                outcome.result, outcome.seconds = "rebuilt" if changed else "built", time.monotonic() - start
                log(f"{step} {outcome.result} in {human_duration(outcome.seconds)} ({human_size(path.stat().st_size)})")
            outcome.size = path.stat().st_size
            outcomes.append(outcome)
            kept.add(path)
    reuse.clean_build_dirs(channel)
    reuse.prune_channel(channel, kept, py_ver, log)
    return outcomes


def build_one(rendered, channel: Path, tool, path: Path, build_log: BuildLog) -> None:  # noqa: ANN001
    """Build one rendered stand-in into `path` in the channel; a failure's log is kept in LOGS_DIR."""
    name = path.name.removesuffix(".conda")
    try:
        rendered.run_build(tool_config=tool, output_dir=channel, channels=[channel.as_uri()],
                           package_format=PACKAGE_FORMAT, progress_callback=build_log)
    except Exception as exc:  # noqa: BLE001
        reuse.clean_build_dirs(channel)
        saved = channel / LOGS_DIR / f"{name}.log"
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text("\n".join(build_log.lines) + "\n")
        raise PipelineError(f"building the {name} stand-in failed: {first_line(exc)} (log: {saved})") from None
    if not reuse.is_complete_package(path):
        raise PipelineError(f"rattler-build reported success but {path.parent.name}/{path.name} is missing")


def variant_overrides(m: Machine) -> dict[str, list[str]]:
    gcc_major = m.gcc_version.split(".")[0]
    return {
        "c_compiler_version": [gcc_major],
        "cxx_compiler_version": [gcc_major],
        "c_stdlib_version": [".".join(m.target.glibc.split(".")[:2])],
    }


def write_variants_file(channel: Path, m: Machine) -> Path:
    path = channel / VARIANTS_FILE_NAME
    header = (
        "# Written by `ssm-conda-dev standin`: this stand-in channel's compilers and glibc are the\n"
        f"# machine's (gcc {m.gcc_version}, glibc {m.target.glibc}), not conda-forge's. Merge over the variant\n"
        f"# file when building against it. It holds python {', '.join(reuse.channel_pythons(channel))}, "
        f"pytorch {m.torch_version}\n# (CUDA {m.cuda_mm}) only.\n"
    )
    tmp = path.with_suffix(".tmp")
    tmp.write_text(header + yaml.safe_dump(variant_overrides(m), sort_keys=False, default_flow_style=None))
    tmp.replace(path)
    return path

