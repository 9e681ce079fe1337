"""GPU checks on a machine with a GPU but no conda channel: pip-build the patched sdist, run the tests, benchmark.

    ssm-conda gpu-wheel prepare                 # with network: the patched source into gpu-wheel/
    ssm-conda gpu-wheel run                     # on the GPU machine: build, tests, benchmark, summary
    PY_WITH_ITS_TORCH -m ssm_conda gpu-wheel prepare --wheel   # also build the wheel (no GPU needed)
    ssm-conda gpu-wheel run --wheel gpu-wheel/dist/causal_conv1d-*.whl

`prepare` unpacks the pinned sdist and applies recipe/causal-conv1d/patches (so the GPU machine needs neither
network nor `patch`). `run` builds a wheel from that tree with pip against the machine's own
torch and nvcc (TORCH_CUDA_ARCH_LIST from --arch, default this GPU's), installs it into a folder
of its own (the machine's Python is left as it was), runs the script test of recipe/causal-conv1d/recipe.yaml
(its commands, env and files, read from the recipe: shared/tests/check_arch.py, recipe/causal-conv1d/tests and the upstream
subset) with the GPU required, then ssm-conda bench-kernels.
Results land in --out (default gpu-wheel/results): build.log, tests.log, tests.xml, bench.log, bench.json, bench.png and
summary.json, and a summary table is printed. This is the quick path for a GPU machine without
conda; the packages themselves are tested with ssm-conda gpu-test. `prepare --wheel` builds the wheel on
a machine without a GPU, with a Python holding the GPU machine's torch, so the GPU machine spends
no time compiling; `run --wheel` falls back to building if that wheel does not import there.

Exit status: 0 all passed, 1 a step failed, 2 bad input (nothing written).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from ssm_conda.cli import subcommand
from ssm_conda.console import PipelineError, UsageError, format_table, human_duration, human_size
from ssm_conda.gpu_checks.verdict import PYTEST_SUMMARY
from ssm_conda.machine import detect_compute_capabilities
from ssm_conda.matrix import load_variant_files
from ssm_conda.paths import REPO_ROOT, recipe_of
from ssm_conda.sources import unpack_patched

DEFAULT_DIR = REPO_ROOT / "gpu-wheel"
# The package this quick path builds and tests (mamba-ssm: `ssm-conda gpu-test` on its conda packages)
RECIPE = recipe_of("causal-conv1d")
RECIPE_DIR = RECIPE.parent
SOURCE_NAME = "causal-conv1d-src"
# Benchmark cases at least this big are past the H200's 60 MB L2: their bandwidth is HBM's.
LARGE_BYTES = 256 * 10**6
# What run writes into --out (a lent machine returns at most 8 files); stale ones are removed first.
RESULT_FILES = ("build.log", "tests.log", "tests.xml", "bench.log", "bench.json", "bench.png", "summary.json")
# Progress worth echoing: ninja's "[2/4] nvcc ..." (pip -v) and bench-kernels' "[3/40] fwd ...".
PROGRESS_LINE = re.compile(r"^\s*\[\d+/\d+\] ")


@dataclass
class Step:
    name: str
    ok: bool
    seconds: float
    detail: str


# ---------------------------------------------------------------------------------------------
# prepare (on a machine with network)


def prepare(directory: Path) -> Path:
    """The patched source tree in directory/causal-conv1d-src, written whole or not at all."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / SOURCE_NAME
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        root = unpack_patched(Path(tmp))
        if target.exists():
            shutil.rmtree(target)
        root.rename(target)
    return target


def prebuild(source: Path, archs: str, jobs: int) -> int:
    """Build the wheel here, where CPU time is free, so the GPU machine only installs and tests it."""
    torch_version, _ = torch_info()
    print(f"building for {archs} against torch {torch_version} (log: {source.parent / 'build.log'}) ...", flush=True)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        step, wheel = build_wheel(source, source.parent, Path(tmp), archs, jobs)
    print(f"  build: {'ok' if step.ok else 'FAILED'} in {human_duration(step.seconds)}: {step.detail}")
    if wheel is None:
        return 1
    shown = wheel.relative_to(REPO_ROOT) if wheel.is_relative_to(REPO_ROOT) else wheel
    print(f"on the GPU machine, with {source.name}/ and {shown} carried: "
          f"ssm-conda gpu-wheel run --wheel {shown}")
    return 0


# ---------------------------------------------------------------------------------------------
# run (on the GPU machine)


def torch_info() -> tuple[str, str]:
    """(torch version, its CUDA version), or a PipelineError in one line."""
    try:
        import torch
    except ImportError:
        raise PipelineError(f"torch is not importable by {sys.executable}: run with the Python that has it") from None
    if torch.version.cuda is None:
        raise PipelineError(f"torch {torch.__version__} is not a CUDA build: the kernels cannot be built or run")
    return torch.__version__, torch.version.cuda


def arch_list(value: str, cuda: str) -> str:
    """TORCH_CUDA_ARCH_LIST for --arch (native or a list), checked against variants/ for this CUDA."""
    files = {f.cuda: f for f in load_variant_files()}
    major_minor = ".".join(cuda.split(".")[:2])
    vfile = files.get(major_minor) or max(files.values(), key=lambda f: tuple(map(int, f.cuda.split("."))))
    return vfile.resolve_arch(value)


def cuda_home() -> str:
    """The toolkit nvcc belongs to: $CUDA_HOME, else where nvcc itself says it lives.

    nvcc on PATH may be a wrapper script (a /usr/local/bin/nvcc that execs the toolkit's), so the
    folder above it need not hold the CUDA headers; nvcc's own _HERE_ (from --dryrun) does.
    """
    home = os.environ.get("CUDA_HOME")
    if home:
        return home
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise PipelineError("no nvcc on PATH and CUDA_HOME is unset: the extension cannot be compiled here")
    dryrun = subprocess.run([nvcc, "--dryrun", "-c", "-x", "cu", os.devnull, "-o", os.devnull],
                            capture_output=True, text=True, check=False).stderr
    here = re.search(r"^#\$ _HERE_=(.+)$", dryrun, re.M)
    candidates = [Path(here.group(1)).parent] if here else []
    candidates.append(Path(nvcc).resolve().parent.parent)
    for candidate in candidates:
        if (candidate / "include" / "cuda_runtime_api.h").is_file():
            return str(candidate)
    raise PipelineError(f"cannot find the CUDA headers of {nvcc} (looked in {', '.join(map(str, candidates))}); "
                        "set CUDA_HOME to its toolkit")


def run_logged(command: Sequence[str], log: Path, env: dict[str, str], cwd: Path,
               echo: re.Pattern[str] | None = None) -> tuple[bool, float]:
    """Run command with its output in log, printing the lines echo matches (progress); (ok, seconds)."""
    start = time.monotonic()
    with log.open("w") as out:
        out.write("$ " + " ".join(command) + "\n")
        out.flush()
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace", env=env, cwd=cwd) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                out.write(line)
                if echo is not None and echo.search(line):
                    print(f"  {line.strip()[:160]}", flush=True)
    return proc.returncode == 0, time.monotonic() - start


def tail(log: Path, lines: int = 15) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def junit_counts(report: Path) -> dict[str, int]:
    """passed/failed/errors/skipped over every test suite of a JUnit XML report."""
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    root = ET.parse(report).getroot()
    for suite in root.iter("testsuite"):
        for key in counts:
            counts[key] += int(suite.get(key, 0))
    return {"passed": counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"],
            "failed": counts["failures"], "errors": counts["errors"], "skipped": counts["skipped"]}


def bench_figures(report: Path) -> dict[str, dict[str, float | int]]:
    """Per op: cases, median fraction of the copy's bandwidth (cases past L2), median speed-up."""
    results = json.loads(report.read_text())["results"]
    figures = {}
    for op in dict.fromkeys(r["op"] for r in results):
        rows = [r for r in results if r["op"] == op]
        large = [r["fraction_of_copy"] for r in rows if r["bytes"] >= LARGE_BYTES] or [r["fraction_of_copy"] for r in rows]
        speedups = [r["speedup_vs_ref"] for r in rows if r["speedup_vs_ref"] is not None]
        figures[op] = {
            "cases": len(rows),
            "median_fraction_of_copy": statistics.median(large),
            "median_speedup_vs_ref": statistics.median(speedups) if speedups else None,
            "peak_bandwidth_gbs": max(r["bandwidth_gbs"] for r in rows),
        }
    return figures


def build_wheel(source: Path, log_dir: Path, work: Path, archs: str, jobs: int) -> tuple[Step, Path | None]:
    """pip wheel of the patched tree against this Python's torch, into dist/ beside the source."""
    try:
        home = cuda_home()
    except PipelineError as exc:
        return Step("build", False, 0.0, str(exc)), None
    env = {**os.environ, "CUDA_HOME": home, "CAUSAL_CONV1D_FORCE_BUILD": "TRUE",
           "TORCH_CUDA_ARCH_LIST": archs, "MAX_JOBS": str(jobs),
           "NVCC_THREADS": str(max(1, (os.cpu_count() or 1) // jobs)), "NVCC_LINEINFO": "0"}
    build_dir = work / "src"
    shutil.copytree(source, build_dir)
    log = log_dir / "build.log"
    # Kept beside the source: a second call on the same machine can pass it as --wheel.
    dist = source.parent / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    ok, seconds = run_logged([sys.executable, "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps",
                              "--no-index", "-w", str(dist), str(build_dir)], log, env, work, echo=PROGRESS_LINE)
    wheels = sorted(dist.glob("causal_conv1d-*.whl"))
    if not ok or not wheels:
        return Step("build", False, seconds, f"pip wheel failed; see build.log:\n{tail(log)}"), None
    return Step("build", True, seconds, f"{wheels[0].name}, {human_size(wheels[0].stat().st_size)}, archs {archs}"), wheels[0]


def install(wheel: Path, site: Path) -> Step:
    """pip-install the wheel into site (not the machine's Python), then import its extension there."""
    log = site.parent / f"{site.name}.log"  # not in --out: a lent machine returns 8 files at most
    ok, seconds = run_logged([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target",
                              str(site), str(wheel)], log, dict(os.environ), site.parent)
    if not ok:
        return Step("install", False, seconds, tail(log))
    # An extension built against another torch fails here (undefined symbols), not in 900 tests.
    probe = "import torch, causal_conv1d_cuda, causal_conv1d; print('imports with torch', torch.__version__)"
    env = {**os.environ, "PYTHONPATH": str(site)}
    imported, more = run_logged([sys.executable, "-c", probe], log, env, site.parent)
    detail = f"{wheel.name} into {site.name}/, " + ("imports" if imported else f"does not import:\n{tail(log, 4)}")
    return Step("install", imported, seconds + more, detail)


@dataclass
class TestSection:
    """The recipe's script test: its commands, environment and files (recipe/ and source/)."""

    commands: list[str]
    env: dict[str, str]
    recipe_files: list[str]
    source_files: list[str]  # from the sdist
    # From the recipe's path sources (target_directory -> the folder it names), e.g. shared/tests/
    # from ../shared: {"shared/tests/": recipe/shared/tests}.
    path_files: dict[str, Path] = field(default_factory=dict)


def recipe_test_section(archs: str) -> TestSection:
    """The script test of recipe/causal-conv1d/recipe.yaml, with this build's variant values: its arch
    list for ${{ cuda_arch_list }}, and 0 for ${{ nvcc_lineinfo }} (the wheel is built without NVCC_LINEINFO)."""
    recipe = yaml.safe_load(RECIPE.read_text())
    (script,) = [t for t in recipe["tests"] if "script" in t]
    values = {"${{ cuda_arch_list }}": archs, "${{ nvcc_lineinfo }}": "0"}
    env = {k: values.get(str(v), str(v)) for k, v in script["script"].get("env", {}).items()}
    unresolved = [f"{k}={v}" for k, v in env.items() if "${{" in v]
    if unresolved:
        raise PipelineError(f"recipe test env needs variables this script does not set: {', '.join(unresolved)}")
    files = script.get("files", {})
    sources = recipe["source"] if isinstance(recipe["source"], list) else [recipe["source"]]
    paths = {s["target_directory"].rstrip("/") + "/": RECIPE_DIR / s["path"] for s in sources if "path" in s}
    sdist_files, path_files = [], {}
    for name in files.get("source", []):
        target = next((t for t in paths if name.startswith(t)), None)
        if target is None:
            sdist_files.append(name)
        else:
            path_files[name] = (paths[target] / name.removeprefix(target)).resolve()
    return TestSection(list(script["script"]["content"]), env, files.get("recipe", []), sdist_files, path_files)


def copy_test_files(section: TestSection, source: Path, dest: Path) -> None:
    """The section's files from recipe/ and from the (patched) source, laid out in dest as rattler-build does."""
    for root, names in ((RECIPE_DIR, section.recipe_files), (source, section.source_files)):
        for name in names:
            _copy(root / name, dest / name)
    for name, src in section.path_files.items():
        _copy(src, dest / name)


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        shutil.copy2(src, dst)


def run_tests(source: Path, site: Path, out: Path, work: Path, archs: str, require_gpu: bool) -> Step:
    """The recipe's test section, as rattler-build runs it: its files in the working folder, its commands."""
    section = recipe_test_section(archs)
    tests = work / "test"
    copy_test_files(section, source, tests)
    report = out / "tests.xml"
    env = {**os.environ, **section.env, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1",
           "CAUSAL_CONV1D_REQUIRE_GPU": "1" if require_gpu else "0", "PYTEST_ADDOPTS": f"--junitxml={report}"}
    log = out / "tests.log"
    # `python` in the recipe's commands is this Python (the one with torch).
    script = "set -e\npython() { " + shlex.quote(sys.executable) + ' "$@"; }\n' + "\n".join(section.commands)
    ok, seconds = run_logged(["bash", "-c", script], log, env, tests, echo=PYTEST_SUMMARY)
    if not report.is_file():
        detail = f"a command before pytest failed, or pytest did not run; see tests.log:\n{tail(log)}"
        return Step("tests", False, seconds, detail)
    counts = junit_counts(report)
    detail = ", ".join(f"{n} {k}" for k, n in counts.items() if n or k == "passed")
    if require_gpu and counts["skipped"]:
        ok = False
    return Step("tests", ok, seconds, detail)


def run_bench(site: Path, out: Path, bench_args: Sequence[str]) -> tuple[Step, dict | None]:
    command, env = subcommand("bench-kernels", "--json-file", str(out / "bench.json"), *bench_args)
    env.update(PYTHONPATH=os.pathsep.join((str(site), env["PYTHONPATH"])), PYTHONUNBUFFERED="1")
    log = out / "bench.log"
    try:
        import matplotlib  # noqa: F401

        command += ["--plot", str(out / "bench.png")]
    except ImportError:
        pass
    ok, seconds = run_logged(command, log, env, out, echo=PROGRESS_LINE)
    if not ok or not (out / "bench.json").is_file():
        return Step("bench", False, seconds, tail(log, 3)), None
    figures = bench_figures(out / "bench.json")
    detail = "; ".join(
        f"{op}: {f['median_fraction_of_copy']:.0%} of copy"
        + ("" if f["median_speedup_vs_ref"] is None else f", {f['median_speedup_vs_ref']:.1f}x ref")
        for op, f in figures.items()
    )
    return Step("bench", True, seconds, detail), figures


def run_checks(args: argparse.Namespace) -> int:
    source = args.source.resolve()
    if not (source / "setup.py").is_file():
        raise UsageError(f"no patched source at {source}: run `ssm-conda gpu-wheel prepare` first "
                         f"(where the sdist can be downloaded) and carry {DEFAULT_DIR.name}/{SOURCE_NAME}")
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, not {args.jobs}")
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} is a file; name a folder for the results")
    if args.wheel is not None and not args.wheel.is_file():
        raise UsageError(f"no such wheel: {args.wheel} (pass a causal_conv1d-*.whl, or leave --wheel out to build)")
    caps = detect_compute_capabilities()
    if not caps and not args.allow_no_gpu:
        raise PipelineError("no GPU on this machine (nvidia-smi reports none, torch sees none): run this on a "
                            "GPU machine, or pass --allow-no-gpu --arch 9.0 to check the build alone")
    torch_version, cuda = torch_info()
    archs = arch_list(args.arch, cuda)
    if args.wheel is None:
        cuda_home()

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    for name in RESULT_FILES:
        (out / name).unlink(missing_ok=True)
    gpu = ", ".join(caps) or "none"
    print(f"GPU compute capability: {gpu}; torch {torch_version} (CUDA {cuda}); archs {archs}; results in {out}")
    steps: list[Step] = []
    figures = None

    def record(step: Step) -> bool:
        steps.append(step)
        print(f"  {step.name}: {'ok' if step.ok else 'FAILED'} in {human_duration(step.seconds)}", flush=True)
        return step.ok

    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        work = Path(tmp)
        ready = False
        if args.wheel is not None:
            print(f"install {args.wheel.name} ...", flush=True)
            step = install(args.wheel.resolve(), work / "site-prebuilt")
            ready, site = step.ok, work / "site-prebuilt"
            if ready:
                record(step)
            else:  # built elsewhere, against another torch or system: build here instead
                record(Step("prebuilt", True, step.seconds, f"unusable here, building instead: {step.detail}"))
        if not ready:
            print(f"build for {archs} (MAX_JOBS={args.jobs}; log: {out / 'build.log'}) ...", flush=True)
            step, wheel = build_wheel(source, out, work, archs, args.jobs)
            if record(step) and wheel is not None:
                print("install ...", flush=True)
                site = work / "site"
                ready = record(install(wheel, site))
        if ready:
            print("tests ...", flush=True)
            record(run_tests(source, site, out, work, archs, require_gpu=not args.allow_no_gpu))
            if args.no_bench:
                pass
            elif not caps:
                steps.append(Step("bench", True, 0.0, "skipped: no GPU (--allow-no-gpu)"))
            else:
                print("bench ...", flush=True)
                step, figures = run_bench(site, out, args.bench_arg or [])
                record(step)

    summary = {"gpu": gpu, "torch": torch_version, "cuda": cuda, "archs": archs,
               "steps": [vars(s) for s in steps], "bench": figures}
    if (out / "tests.xml").is_file():
        summary["tests"] = junit_counts(out / "tests.xml")
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print()
    rows = [[s.name, "PASS" if s.ok else "FAIL", human_duration(s.seconds), (s.detail.splitlines() or [""])[0]]
            for s in steps]
    print(format_table(["step", "result", "time", "detail"], rows))
    for step in steps:
        if not step.ok and "\n" in step.detail:
            print(f"\n{step.name}:\n{step.detail}")
    return 0 if steps and all(s.ok for s in steps) else 1


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="unpack the pinned sdist and apply recipe/causal-conv1d/patches into --dir")
    prep.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"where to put it (default {DEFAULT_DIR.name}/)")
    prep.add_argument("--wheel", action="store_true",
                      help="also build the wheel with this Python's torch (the GPU machine's version), for run --wheel")
    prep.add_argument("--arch", default="native",
                      help='with --wheel: the GPU machine\'s architectures, e.g. "9.0" (default native: this machine\'s GPUs)')
    prep.add_argument("--jobs", type=int, default=2, help="with --wheel: MAX_JOBS")
    go = sub.add_parser("run", help="build with pip, run the tests and the benchmark")
    go.add_argument("--source", type=Path, default=DEFAULT_DIR / SOURCE_NAME, help="the tree `prepare` wrote")
    go.add_argument("--out", type=Path, default=DEFAULT_DIR / "results",
                    help=f"results folder (default {DEFAULT_DIR.name}/results)")
    go.add_argument("--arch", default="native", help='native (this GPU, default) or a list like "9.0" or "8.0;9.0+PTX"')
    go.add_argument("--jobs", type=int, default=4, help="MAX_JOBS for the build (there are 4 sources)")
    go.add_argument("--wheel", type=Path, help="test this already-built wheel instead of building")
    go.add_argument("--allow-no-gpu", action="store_true", help="build and run what needs no GPU (GPU tests skip)")
    go.add_argument("--no-bench", action="store_true", help="skip the benchmark")
    go.add_argument("--bench-arg", action="append", metavar="ARG", help="passed to bench-kernels (repeatable)")


def run(args: argparse.Namespace) -> int:
    if args.command == "prepare":
        archs = arch_list(args.arch, torch_info()[1]) if args.wheel else ""
        target = prepare(args.dir.resolve())
        print(f"patched source in {target}")
        if args.wheel:
            return prebuild(target, archs, args.jobs)
        shown = target.relative_to(REPO_ROOT) if target.is_relative_to(REPO_ROOT) else target
        print(f"copy {shown} to the GPU machine (with this checkout), then run there: "
              f"ssm-conda gpu-wheel run --source {shown}")
        return 0
    return run_checks(args)
