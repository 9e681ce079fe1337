"""Which causal-conv1d (or mamba-ssm) package fits this machine, and what will go wrong with the others.

Reads the driver and GPUs (conda's __cuda and __cuda_arch through py-rattler, each GPU from nvidia-smi),
the target Python's torch (imported in a subprocess, so a broken torch cannot take the doctor down),
the conda/pixi environment and any causal-conv1d and mamba-ssm installed; prints them, the command that
installs (or builds) the matching package, and the known traps that apply. Missing pieces are reported,
never fatal: the exit status is 0 unless the arguments are wrong. --json prints only JSON on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from ssm_conda.channels import DEFAULT_CHANNEL, normalise_channel
from ssm_conda.console import UsageError
from ssm_conda.doctor.advice import FALLBACK_VERSIONS, advise, default_package
from ssm_conda.doctor.facts import Probes, gather_facts
from ssm_conda.doctor.report import render_text, to_json
from ssm_conda.matrix import generation_gates, load_variant_files, rendered_recipe
from ssm_conda.paths import variants_dir, workspace
from ssm_conda.project import NAMES as PACKAGES


def default_channel() -> str:
    """The build's output channel once it holds an index, else the public channel."""
    local = workspace() / "output"  # `ssm-conda build`'s default --output-dir
    return str(local) if any(local.glob("*/repodata.json")) else DEFAULT_CHANNEL


def package_version(package: str) -> str:
    """The version the package's recipe renders to; an installed tooling without the recipes has its
    release's versions."""
    try:
        return str(rendered_recipe(package)["package"]["version"])
    except Exception:  # noqa: BLE001 - no recipe here (an installed tooling): whatever rattler-build raises
        return FALLBACK_VERSIONS[package]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--interpreter", default=sys.executable, metavar="PATH",
                        help="Python of the environment to check (default: the one running ssm-conda)")
    parser.add_argument("--channel", default=None,
                        help=f"channel to install from (default: output/ when `ssm-conda build` has "
                        f"filled it, else {DEFAULT_CHANNEL})")
    parser.add_argument("--package", choices=PACKAGES, help="the package to install (default: mamba-ssm when it is "
                        "installed, else causal-conv1d)")
    parser.add_argument("--variants-dir", type=Path, help="variant files (default: the workspace's variants/)")
    parser.add_argument("--no-import", action="store_true", help="read torch's metadata only, do not import it")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON on stdout instead of the table")


def _interpreter(value: str) -> str:
    found = value if os.sep in value else shutil.which(value) or value
    if not Path(found).exists():
        raise UsageError(f"--interpreter {value!r}: no such file; give the path of a Python executable")
    return found


def _channel(value: str) -> str:
    """--channel checked as build's is; a folder as its absolute path, since a quoted ~ would not expand."""
    normalise_channel(value)
    return str(Path(value).expanduser().resolve()) if Path(value).expanduser().is_dir() else value


def run(args: argparse.Namespace, probes: Probes | None = None) -> int:
    interpreter = _interpreter(args.interpreter)
    channel = _channel(args.channel) if args.channel else default_channel()
    args.variants_dir = args.variants_dir or variants_dir()
    if not args.variants_dir.is_dir():
        raise UsageError(f"--variants-dir {str(args.variants_dir)!r}: no such directory")
    facts = gather_facts(interpreter, probes, import_torch=not args.no_import)
    files = load_variant_files(args.variants_dir, facts.platform)  # linux-aarch64's lists have 8.7 (Jetson Orin)
    if args.verbose:  # where the facts came from, on stderr so that --json stays clean
        print(f"driver facts from: {', '.join(facts.driver.sources) or 'nothing'}", file=sys.stderr)
        for error in facts.driver.errors:
            print(f"  {error}", file=sys.stderr)
        print(f"interpreter probed: {facts.interpreter.executable}", file=sys.stderr)
    package = args.package or default_package(facts)
    version = package_version(package)
    gates = {f.cuda: generation_gates(f, package, facts.platform) for f in files}
    advice = advise(facts, files, channel, version, package, gates)
    print(json.dumps(to_json(facts, advice), indent=2) if args.json else render_text(facts, advice))
    return 0
