"""Re-run built packages' test sections on this machine's GPU: `rattler-build test` for each.

    ssm-conda-dev gpu-test output/                      # every causal-conv1d and mamba-ssm package in it
    ssm-conda-dev gpu-test output/ --cuda 13.0 --generation sm90 --package mamba-ssm   # the selectors of build

Each test (the imports, then the package's pytest run) runs in a fresh environment. A GPU is required: without
one the command refuses to start, and a run whose GPU tests were skipped counts as failed (the tests see no
environment variable of ours, so they require the GPU wherever the driver reports one). --allow-no-gpu runs
what needs no GPU, e.g. on a build machine.

Exit status: 0 all passed, 1 a test failed (or GPU tests were skipped, or none ran), 2 bad input (a damaged archive too)."""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rattler_build import Package
from rattler_build.progress import ProgressCallback
from ssm_conda import options
from ssm_conda.channels import check_archive, find_packages, name_and_build_of, writable_dir
from ssm_conda.console import Outcome, PipelineError, UsageError, print_summary
from ssm_conda.machine import detect_compute_capabilities, virtual_package_overrides
from ssm_conda.matrix import choose_built
from ssm_conda.project import NAMES
from ssm_conda.selection import Selection, add_selector_arguments, selection_from_args

# What a package's test section prints when its GPU tests did not run (recipe/shared/tests/gpu_gate.py, Gate.skip_marker
# and Gate.required_marker): "<package> GPU tests skipped: <why>", or "<package> GPU required but unusable: <why>".
GPU_TESTS_NOT_RUN = re.compile(r"\S+ GPU (?:tests skipped|required but unusable):")
PYTEST_SUMMARY = re.compile(r"^=+ (.*(?:passed|failed|skipped|errors?|deselected|no tests ran)\b.*) in [\d.]+s(?: \(.*\))? =+$")


def summarize_output(lines: Sequence[str]) -> str:
    """The pytest summary line(s) of a test's output, or ''."""
    return "; ".join(match.group(1) for match in (PYTEST_SUMMARY.match(line.strip()) for line in lines) if match)


def judge(success: bool, lines: Sequence[str], require_gpu: bool) -> tuple[bool, str]:
    """Pass/fail of one test from rattler-build's verdict and, when a GPU is required, its output."""
    summary = summarize_output(lines)
    skipped = next((ln.strip() for ln in lines if GPU_TESTS_NOT_RUN.search(ln)), "")
    if not success:
        return False, summary or "failed (see the log)"
    if require_gpu and skipped:
        return False, skipped
    if summary and not re.search(r"\b[1-9]\d* passed", summary):  # pytest ran, but no test passed: an empty selection
        return False, f"no test ran: {summary}"
    return True, summary or "passed"


def lower_bound(depends: Sequence[str], name: str) -> str | None:
    """X.Y of a package's `name >=X.Y,...` dependency (cuda-version: its CUDA; cuda-arch: its lowest architecture)."""
    found = (re.match(rf"{re.escape(name)}\s+>=(\d+\.\d+)", spec) for spec in depends)
    return next((match.group(1) for match in found if match), None)


class _Echo(ProgressCallback):
    """Streams rattler-build's log lines when --verbose (downloads: the protocol's no-ops)."""

    def on_build_step(self, event) -> None:  # noqa: ANN001
        print(f"  [{event.step_name}] {event.message}", flush=True)

    def on_log(self, event) -> None:  # noqa: ANN001
        print(f"  {event.message}", flush=True)


@dataclass(frozen=True)
class GpuTestOptions:
    inputs: tuple[str, ...]  # .conda files and channel folders
    selection: Selection
    variants_dir: Path | None  # None: the workspace's, needed only where a selector names a variant
    channels: tuple[str, ...]
    log_dir: Path | None  # checked writable, not created
    require_gpu: bool
    verbose: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> GpuTestOptions:
        log_dir = args.log_dir and writable_dir(args.log_dir.resolve(), "--log-dir")
        return cls(tuple(args.packages), selection_from_args(args), args.variants_dir, options.channels(args.channel), log_dir,
                   not args.allow_no_gpu, args.verbose)


def run_package(path: Path, test: GpuTestOptions, has_gpu: bool, outcomes: list[Outcome]) -> None:
    """Run the package's tests (its archive checked by run already), adding each outcome as it ends."""
    package = Package.from_file(path)
    if not package.tests:
        outcomes.append(Outcome(path.name, "-", "failed", detail="its test section holds no test"))
    # Without a GPU the package's own lower bounds stand in for the driver's __cuda and the GPU's __cuda_arch.
    bounds = [None, None] if has_gpu else [lower_bound(package.depends, n) for n in ("cuda-version", "cuda-arch")]
    with virtual_package_overrides(*bounds) as added:
        for variable, value in added.items():
            print(f"no GPU: solving with {variable}={value}")
        for index, test_section in enumerate(package.tests):
            imports = getattr(test_section, "imports", None)  # else its kind (CommandsTest: the pytest run)
            kind = f"python imports: {', '.join(imports)}" if imports else type(test_section).__name__
            print(f"{path.name}: test {index} ({kind}) ...", flush=True)
            start = time.monotonic()
            try:
                result = package.run_test(index, channel=list(test.channels), progress_callback=_Echo() if test.verbose else None)
                success, lines = result.success, list(result.output)
            except Exception as exc:  # rattler-build reports solve and script failures by raising
                success, lines = False, [f"error: {exc}"]
            seconds = time.monotonic() - start
            if test.log_dir is not None:
                (test.log_dir / f"{path.name.removesuffix('.conda')}.test{index}.log").write_text("\n".join(lines) + "\n")
            ok, detail = judge(success, lines, test.require_gpu)
            if not ok and not test.verbose:
                for line in lines[-40:]:
                    print(f"  | {line}")
            outcomes.append(Outcome(path.name, f"test {index}: {kind[:40]}", "passed" if ok else "failed", seconds,
                                    detail=detail[:120]))


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("packages", nargs="+", metavar="PACKAGE_OR_DIR",
                        help=".conda files, or channel folders (e.g. output/) holding causal-conv1d or mamba-ssm packages")
    options.add_channels(parser, "a channel to solve the test environments from")
    parser.add_argument("--allow-no-gpu", action="store_true", help="run without a GPU: GPU tests skip instead of failing")
    parser.add_argument("--log-dir", type=Path, metavar="DIR", help="write each test's full output here")
    add_selector_arguments(parser, "test only this package (repeatable; default: every one)")
    options.add_variants_dir(parser)


def package_files(inputs: Sequence[str]) -> list[Path]:
    """This project's packages among the named files and channels, each once."""
    return [p for p in find_packages(inputs) if name_and_build_of(p.name)[0] in NAMES]


def run(args: argparse.Namespace) -> int:
    test = GpuTestOptions.from_args(args)
    packages = choose_built(package_files(test.inputs), lambda p: name_and_build_of(p.name), test.selection, test.variants_dir)
    if not packages:
        raise UsageError(f"no {' or '.join(NAMES)} package in {', '.join(test.inputs)} that the selectors "
                         "choose (build first, or name a .conda file)")
    caps = detect_compute_capabilities()
    if test.require_gpu:
        if not caps:
            raise PipelineError("no GPU on this machine (neither nvidia-smi nor the driver reports one): run this on a "
                                "GPU machine, or pass --allow-no-gpu to run only the checks that need no GPU")
        print(f"GPUs: compute capability {', '.join(caps)}; channels: {', '.join(test.channels)}")
    for path in packages:  # a damaged archive is bad input and stops the run before any test
        try:  # every member and file, as upload checks them (Package.from_file reads info/ alone)
            check_archive(path)
            Package.from_file(path)
        except Exception as exc:
            raise UsageError(f"cannot read package {path}: {' '.join(str(exc).split())}") from exc
    if test.log_dir:
        test.log_dir.mkdir(parents=True, exist_ok=True)
    outcomes: list[Outcome] = []
    try:
        for path in packages:
            run_package(path, test, bool(caps), outcomes)
    finally:  # the results so far, however the run ends
        print()
        print_summary(outcomes)
        failed = [o for o in outcomes if o.failed]
        print(f"\n{len(outcomes) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0
