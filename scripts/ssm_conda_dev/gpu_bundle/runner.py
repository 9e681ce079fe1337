"""The GPU check, run on a GPU node from the bundle `ssm-conda-dev gpu-bundle` made (this file is its __main__.py):

    python3 gpu-check-VARIANT.pyz [RESULTS_DIR]

Standard library only, beside the node's own torch, triton, einops, transformers and pytest. It checks first that
this Python, its torch (minor and CUDA line) and the visible GPU fit the packages (one line and its exit code
otherwise, nothing run), unpacks their files into a temporary folder (the node's site-packages is not touched),
runs each package's test section as its recipe does (the imports, the script: the kernels against the references,
the arch checks, upstream's subset, mamba-ssm's transformers path) with the GPU required, then the
kernel benchmark, and writes RESULTS_DIR (default: ./gpu-check-results): summary.json and summary.txt, each
package's pytest log and JUnit report, the benchmark's bench.json, bench.txt and bench.svg, and gpu.txt.

Exit status: 0 every test ran and passed and the benchmark ran; 1 a test or the benchmark failed; 2 bad usage or a
damaged bundle; 3 another Python or torch than the packages'; 4 no usable GPU of the packages' generation.
<PREFIX>_TEST_DEVICE=cpu (CAUSAL_CONV1D_, MAMBA_SSM_) is the tests' own dry run on the CPU, against stand-in
extensions: the GPU is then neither required nor looked for, and the benchmark does not run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

MANIFEST = "manifest.json"
STEP_TIMEOUT_S = 1800  # a hung kernel must not hold the node for ever


class Refusal(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def prefix_of(package: str) -> str:
    return package.upper().replace("-", "_") + "_"


def bounds_hold(spec: str, version: tuple[int, ...]) -> bool:
    """Whether `version` satisfies a spec of comma-joined >=, <, >, <=, == bounds (as __cuda_arch's gates are)."""
    for part in filter(None, spec.replace(" ", "").split(",")):
        op, number = re.fullmatch(r"(>=|<=|==|>|<)?([\d.]+)", part).groups()
        bound = tuple(int(n) for n in number.split("."))
        width = max(len(bound), len(version))
        left, right = version + (0,) * (width - len(version)), bound + (0,) * (width - len(bound))
        if not {">=": left >= right, "<=": left <= right, ">": left > right, "<": left < right,
                "==": left == right, None: left == right}[op]:
            return False
    return True


def check_node(variant: dict, dry_run: bool) -> str:
    """The torch and GPU here against the packages' variant; a line describing them, else Refusal."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    if tuple(map(int, python.split("."))) < tuple(map(int, variant["python"].split("."))):
        raise Refusal(3, f"these packages are for Python {variant['python']} and later, this is Python {python} "
                         f"({sys.executable}): run the bundle with a later Python that has torch {variant['torch']}")
    try:
        import torch
    except ImportError as exc:
        raise Refusal(3, f"torch is not importable in {sys.executable} ({exc}): the packages need torch "
                         f"{variant['torch']}, CUDA {variant['cuda']}") from None
    minor, cuda = ".".join(torch.__version__.split("+")[0].split(".")[:2]), torch.version.cuda
    if minor != variant["torch"] or (cuda and cuda.split(".")[0] != variant["cuda"].split(".")[0]):
        raise Refusal(3, f"these packages were built against torch {variant['torch']} (CUDA {variant['cuda']}); this "
                         f"Python has torch {torch.__version__} (CUDA {cuda or 'none'}): make the bundle for torch "
                         f"{minor}, or run it where torch {variant['torch']} is installed")
    if dry_run:
        return f"torch {torch.__version__}, a dry run of the tests on the CPU (no GPU looked for)"
    if cuda is None:
        raise Refusal(4, f"no usable GPU: torch {torch.__version__} is a CPU build; run this with a CUDA {variant['cuda']} "
                         f"build of torch {variant['torch']} on a machine with an NVIDIA GPU")
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        raise Refusal(4, f"no usable GPU: torch {torch.__version__} sees no CUDA device; run this on a machine with an "
                         "NVIDIA GPU and driver")
    capability = torch.cuda.get_device_capability(0)
    name, found = torch.cuda.get_device_name(0), f"{capability[0]}.{capability[1]}"
    gate = variant["cuda_arch"] or f">={variant['archs'][0]}"  # the all-architecture build: its oldest architecture on
    if not bounds_hold(gate, capability):
        raise Refusal(4, f"{name} (compute capability {found}) is not of this bundle's generation {variant['generation']} "
                         f"(__cuda_arch {gate}); make the bundle for the generation of this GPU")
    return f"{name} (compute capability {found}), torch {torch.__version__} (CUDA {cuda})"


def gpu_facts() -> str:
    """The GPU's name, driver and clocks, as nvidia-smi reports them."""
    fields = "name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.limit,temperature.gpu"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv"], capture_output=True, text=True,
                             timeout=60)
        return out.stdout or out.stderr
    except (OSError, subprocess.SubprocessError) as exc:
        return f"nvidia-smi did not answer: {exc}\n"


def junit_counts(report: Path) -> dict:
    """passed, failed, errors, skipped (with reasons) of a JUnit report; all zero where there is none."""
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "skip_reasons": {}}
    if not report.is_file():
        return counts
    for case in ET.parse(report).iter("testcase"):
        kinds = {child.tag: child.get("message", "") for child in case}
        outcome = next((k for k in ("failure", "error", "skipped") if k in kinds), "passed")
        counts[{"failure": "failed", "error": "errors"}.get(outcome, outcome)] += 1
        if outcome == "skipped":
            counts["skip_reasons"][kinds["skipped"]] = counts["skip_reasons"].get(kinds["skipped"], 0) + 1
    return counts


def run_step(command: str, cwd: Path, env: dict, log: Path) -> int:
    """A test command as the recipe states it, by the shell, its output into `log` and onto the terminal's tail."""
    with log.open("a") as out:
        out.write(f"$ {command}\n")
        out.flush()
        try:
            return subprocess.run(command, shell=True, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=STEP_TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            out.write(f"timed out after {STEP_TIMEOUT_S}s\n")
            return 124


def test_package(package: dict, prefix: Path, results: Path, env: dict, dry_run: bool) -> dict:
    """One package's test section as rattler-build stores it (info/tests/tests.yaml): the imports, and each script
    with its recipe's environment. (The files the recipe names were checked when the package was built.)"""
    name, outcome = package["name"], {"name": package["name"], "steps": []}
    log = results / f"{name}-tests.log"
    log.write_text("")
    for test in package["tests"]:
        if "python" in test:
            for module in test["python"].get("imports", []):
                status = run_step(f"python -c {shlex.quote('import ' + module)}", results, env, log)
                outcome["steps"].append({"import": module, "status": status})
            # pip_check: the node's environment is not the package's; pip's view of it says nothing of the package
        elif "script" in test:
            script = test["script"]
            report = results / f"{name}-junit.xml"
            step_env = {**env, **{k: str(v) for k, v in script.get("env", {}).items()},
                        "PYTEST_ADDOPTS": f"{env.get('PYTEST_ADDOPTS', '')} --junitxml={shlex.quote(str(report))}".strip()}
            if not dry_run:
                step_env[f"{prefix_of(name)}REQUIRE_GPU"] = "1"
            commands = script["content"] if isinstance(script["content"], list) else [script["content"]]
            for command in commands:
                status = run_step(command, prefix / script["cwd"], step_env, log)
                outcome["steps"].append({"script": command, "status": status, **junit_counts(report)})
    # every step ran and passed: no test skipped (a GPU run runs them all), none failed, a script ran tests at all
    outcome["passed"] = bool(outcome["steps"]) and all(
        s["status"] == 0 and not s.get("skipped") and s.get("passed", 1) for s in outcome["steps"])
    return outcome


def run_benchmark(lib: Path, env: dict, results: Path) -> dict:
    """The kernel benchmark: every op of both packages, bf16 and fp16, both layouts."""
    log = results / "bench.txt"
    command = (f"python -m ssm_conda_dev bench-kernels --json-file {shlex.quote(str(results / 'bench.json'))} "
               f"--plot {shlex.quote(str(results / 'bench.svg'))}")
    status = run_step(command, results, {**env, "PYTHONPATH": f"{lib}{os.pathsep}{env['PYTHONPATH']}"}, log)
    return {"command": command, "status": status}


def main(argv: list[str]) -> int:
    start = time.monotonic()
    bundle = Path(__file__).resolve().parent  # the .pyz itself when run as one
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        raise Refusal(2, "usage: python3 BUNDLE.pyz [RESULTS_DIR] (default: ./gpu-check-results)")
    results = Path(argv[0] if argv else "gpu-check-results").resolve()
    try:
        archive = zipfile.ZipFile(bundle)
        manifest = json.loads(archive.read(MANIFEST))
        variant, packages = manifest["variant"], manifest["packages"]
        dry_run = any(os.environ.get(f"{prefix_of(p['name'])}TEST_DEVICE") == "cpu" for p in packages)
    except (OSError, KeyError, TypeError, ValueError, zipfile.BadZipFile) as exc:
        raise Refusal(2, f"{bundle}: not a GPU-check bundle ({exc!r})") from None
    node = check_node(variant, dry_run)
    if results.exists() and (not results.is_dir() or any(results.iterdir())):
        raise Refusal(2, f"{results} is not an empty folder: name a new folder for the results")
    try:
        results.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise Refusal(2, f"{results}: cannot make the results folder ({exc.strerror})") from None
    print(f"GPU check of {', '.join(p['name'] + ' ' + p['version'] for p in packages)} ({variant['label']}) on {node}",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as scratch:
        prefix, lib, shims = Path(scratch, "prefix"), Path(scratch, "lib"), Path(scratch, "bin")
        try:
            for member in archive.namelist():
                if member.startswith(("prefix/", "lib/")):
                    archive.extract(member, scratch)
        except (OSError, zipfile.BadZipFile, EOFError) as exc:
            raise Refusal(2, f"{bundle}: damaged bundle ({exc})") from None
        shims.mkdir()
        # the recipes' `python` is this one (a script, not a link: a link to a venv's python leaves the venv)
        (shims / "python").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
        (shims / "python").chmod(0o755)
        site = prefix / "site-packages"  # version-independent packages' files, as the installer reads them
        env = {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONNOUSERSITE": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
               "PYTHONDONTWRITEBYTECODE": "1"}
        (results / "gpu.txt").write_text(gpu_facts() if not dry_run else "dry run on the CPU: no GPU looked for\n")
        tested = []
        for package in packages:
            print(f"testing {package['name']} ...", flush=True)
            tested.append(test_package(package, prefix, results, env, dry_run))
            print(f"  {package['name']}: {'passed' if tested[-1]['passed'] else 'FAILED'} "
                  f"({results / (package['name'] + '-tests.log')})", flush=True)
        bench = {"status": None, "why": "dry run on the CPU"} if dry_run else run_benchmark(lib, env, results)
        if not dry_run:
            print(f"benchmark: {'ran' if bench['status'] == 0 else 'FAILED'} ({results / 'bench.txt'})", flush=True)
    ok = all(t["passed"] for t in tested) and (dry_run or bench["status"] == 0)
    summary = {"bundle": manifest, "node": node, "python": sys.version, "packages": tested, "benchmark": bench,
               "seconds": round(time.monotonic() - start, 1), "passed": ok}
    (results / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [f"{t['name']}: {'passed' if t['passed'] else 'FAILED'}; "
             + "; ".join(f"{s.get('script') or s.get('import')}: status {s['status']}"
                         + (f", {s['passed']} passed, {s['failed']} failed, {s['errors']} errors, {s['skipped']} skipped"
                            if "passed" in s else "") for s in t["steps"]) for t in tested]
    lines.append(f"total {summary['seconds']}s; {'every test ran and passed' if ok else 'NOT every test ran and passed'}")
    (results / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Refusal as refusal:
        print(f"error: {refusal}", file=sys.stderr)
        sys.exit(refusal.status)
