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
from dataclasses import dataclass
from pathlib import Path

from ssm_conda import options
from ssm_conda.channels import DEFAULT_CHANNEL, normalise_channel
from ssm_conda.console import UsageError, user_path
from ssm_conda.doctor.advice import advise, default_package
from ssm_conda.doctor.facts import Probes, gather_facts
from ssm_conda.doctor.report import render_text, to_json
from ssm_conda.doctor.rules import note
from ssm_conda.matrix import generation_gates, load_variant_files, rendered_recipe
from ssm_conda.paths import workspace
from ssm_conda.project import NAMES


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--interpreter", default=sys.executable, metavar="PATH",
                        help="Python of the environment to check (default: the one running ssm-conda)")
    options.add_channels(parser, "a channel to install from, named in the commands printed (before conda-forge)",
                         default="output/ when `ssm-conda build` has filled it, else conda-forge")
    parser.add_argument("--package", action="append", choices=NAMES, help="install this package (repeatable; default: "
                        "mamba-ssm when it is installed, else causal-conv1d)")
    options.add_variants_dir(parser)
    parser.add_argument("--no-import", action="store_true", help="read torch's metadata only, do not import it")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON on stdout instead of the table")


def _channel(value: str) -> str:
    """A channel checked as build's is; a folder as its absolute path, since a quoted ~ would not expand."""
    normalise_channel(value)
    return str(Path(value).expanduser().resolve()) if Path(value).expanduser().is_dir() else value


@dataclass(frozen=True)
class DoctorOptions:
    interpreter: str
    channels: tuple[str, ...]
    packages: tuple[str, ...]  # in build order; () chooses by what is installed
    variants_dir: Path
    import_torch: bool
    json: bool
    verbose: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DoctorOptions:
        local = workspace() / "output"  # `ssm-conda build`'s default --output-dir, once it holds an index
        default = str(local) if any(local.glob("*/repodata.json")) else DEFAULT_CHANNEL
        interpreter = args.interpreter if os.sep in args.interpreter else shutil.which(args.interpreter) or args.interpreter
        if not user_path(interpreter, "--interpreter").exists():
            raise UsageError(f"--interpreter {args.interpreter!r}: no such file; give the path of a Python executable")
        return cls(interpreter, options.channels(args.channel, (default,), _channel),
                   tuple(p for p in NAMES if p in (args.package or ())), options.variants_folder(args.variants_dir),
                   not args.no_import, args.json, args.verbose)


def run(args: argparse.Namespace, probes: Probes | None = None) -> int:
    doctor, probes = DoctorOptions.from_args(args), probes or Probes()
    files = load_variant_files(doctor.variants_dir, probes.platform)  # linux-aarch64's lists have 8.7 (Jetson Orin)
    facts = gather_facts(doctor.interpreter, probes, import_torch=doctor.import_torch)
    if doctor.verbose:  # where the facts came from, on stderr so that --json stays clean
        print(f"driver facts from: {', '.join(facts.driver.sources) or 'nothing'}", file=sys.stderr)
        for error in facts.driver.errors:
            print(f"  {error}", file=sys.stderr)
        print(f"interpreter probed: {facts.interpreter.executable}", file=sys.stderr)
    # the packages this platform has (a recipe's build.skip leaves some out: mamba-ssm on Windows needs triton); a note
    # below names the others, asked for or not
    gates = {p: {f.cuda: generation_gates(f, p, facts.platform) for f in files} for p in NAMES}  # per package, per CUDA
    here = [p for p in NAMES if any(gates[p].values())]
    packages = [p for p in doctor.packages or (default_package(facts),) if p in here] or here[:1]
    versions = {p: str(rendered_recipe(p, facts.platform)["package"]["version"]) for p in packages}
    advice = advise(facts, files, versions, doctor.channels, packages, gates[packages[0]])
    advice.findings += [note("not-on-platform", f"{p} has no {facts.platform} package (its recipe skips the platform): "
                             f"{', '.join(here)} only") for p in NAMES if p not in here]
    print(json.dumps(to_json(facts, advice), indent=2) if doctor.json else render_text(facts, advice))
    return 0
