"""From facts to a recommendation (pure, no probing): the variant, the rules' findings, and the commands to run."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ssm_conda.archs import arch_covers, version_key
from ssm_conda.channels import DEFAULT_CHANNEL
from ssm_conda.doctor.facts import Facts, major
from ssm_conda.doctor.rules import MACHINE_RULES, TARGET_RULES, Finding, Target, channel_args, note, ours
from ssm_conda.matrix import ALL_ARCHS, VariantFile, build_glob, generation_for
from ssm_conda.project import NAMES, PACKAGES


@dataclass
class Advice:
    cuda: str | None = None  # the variant's CUDA version
    variant_file: str | None = None
    python: str | None = None
    torch: str | None = None
    reason: str = ""
    build_string: str | None = None  # glob, e.g. cuda130_py312_torch213_sm90_*
    generation: str | None = None  # the GPU generation whose package this machine gets, e.g. sm90
    install: list[str] = field(default_factory=list)  # commands, run in order
    build: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    warnings = property(lambda self: [f for f in self.findings if f.level == "warning"])
    missing = property(lambda self: [f.message for f in self.findings if f.level == "missing"])
    notes = property(lambda self: [f.message for f in self.findings if f.level == "note"])


def choose_variant(facts: Facts, files: Sequence[VariantFile]) -> tuple[VariantFile | None, str]:
    """The variant file (CUDA version) that fits torch's CUDA first, then the driver; and why."""
    if not files:
        return None, ""
    torch, driver_cuda = facts.interpreter.torch, facts.driver_cuda
    by_version = sorted(files, key=lambda f: version_key(f.cuda))
    if torch is not None and torch.cuda:
        same = [f for f in by_version if major(f.cuda) == major(torch.cuda)]
        not_newer = [f for f in same if version_key(f.cuda) <= version_key(torch.cuda)]
        if same:
            return (not_newer[-1] if not_newer else same[0]), f"torch {torch.version} was built with CUDA {torch.cuda}"
    if driver_cuda:
        usable = [f for f in by_version if major(f.cuda) <= major(driver_cuda)]
        full = [f for f in usable if version_key(f.cuda) <= version_key(driver_cuda)]
        if usable:
            return (full or usable)[-1], f"the newest CUDA the driver supports ({driver_cuda})"
        return by_version[0], "the oldest CUDA packaged (the driver is too old for all)"
    return by_version[-1], "no driver or torch CUDA to match: the newest CUDA packaged"


def build_arch_arg(caps: Sequence[str], vfile: VariantFile) -> str:
    """--arch for `ssm-conda build`: native, else each GPU's newest cubin or PTX that runs on it (arch_covers)."""
    # never sm_103 with nvcc 13: it miscompiles it (upstream #105), and the sm_100 cubin runs there
    targets = sorted((a for a in vfile.arch_supported if not (major(vfile.cuda) >= 13 and a == "10.3")), key=version_key)
    if not caps:
        return "all"
    if all(c in targets for c in caps):
        return "native"
    entries = [*reversed(targets), *(f"{a}+PTX" for a in reversed(targets))]
    chosen = {next((e for e in entries if arch_covers(cap, e) is not None), None) for cap in caps} - {None}
    return ";".join(sorted(chosen, key=version_key)) or "all"


def install_commands(facts: Facts, cuda: str, build: str, channels: Sequence[str], versions: Mapping[str, str],
                     python: str, cuda_arch: str | None = None) -> list[str]:
    """`versions`: each package to install, its version; `cuda_arch`: told to conda, whose plugin may be missing."""
    specs = " ".join(f'"{package}={version}={build}"' for package, version in versions.items())
    # Without a driver there is no __cuda virtual package and CUDA builds of pytorch do not solve.
    override = "" if facts.driver_cuda else f"CONDA_OVERRIDE_CUDA={cuda} "
    # pixi solves for the GPU the workspace declares, so only conda gets the __cuda_arch override
    conda_override = override + (f"CONDA_OVERRIDE_CUDA_ARCH={cuda_arch} " if cuda_arch is not None else "")
    interp, commands = facts.interpreter, []
    pip = [n for n in NAMES if (dist := interp.dist(n)) and not dist.from_conda]
    if pip:
        commands.append(f"{shlex.quote(interp.executable)} -m pip uninstall -y {' '.join(pip)}")
    if facts.env.kind == "pixi" and not facts.env.this_project:
        if ours(channels):
            # pixi's channel priority is strict: appended after conda-forge, the package is never taken from it
            commands.append(f"pixi workspace channel add --prepend {' '.join(shlex.quote(c) for c in ours(channels))}")
        commands.append(f"{override}pixi add {specs}")
    elif facts.env.kind == "conda":
        commands.append(f"{conda_override}conda install {channel_args(channels)} {specs}")
    else:
        commands.append(f"{conda_override}conda create -n {list(versions)[-1]} {channel_args(channels)} python={python} {specs}")
    return commands


def channel_notes(channels: Sequence[str], versions: Mapping[str, str], build_string: str, packaged: bool) -> list[Finding]:
    if not ours(channels):
        return [note("conda-forge-pin", f"conda-forge's {' and '.join(versions)} builds carry only conda-forge's current "
                     "pytorch pin; for another torch minor use this project's channel (--channel) or build")]
    folders = [Path(c) for c in ours(channels)]
    if not packaged or not all(f.is_dir() for f in folders):
        return []
    patterns = (f"{package}-{version}-{build_string}.conda" for package, version in versions.items())
    return [note("not-built-yet", f"{', '.join(ours(channels))}: no {pattern} yet: build it first (command below)")
            for pattern in patterns if not any(any(f.glob(f"*/{pattern}")) for f in folders)]


def default_package(facts: Facts) -> str:
    """The last package in build order that is installed (it brings those it needs), else the first."""
    return next((p.name for p in reversed(PACKAGES) if facts.interpreter.dist(p.name)), NAMES[0])


def machine_generation(facts: Facts, vfile: VariantFile, channels: Sequence[str],
                       gates: Mapping[str, Mapping[str, str | None]] | None) -> tuple[str | None, list[Finding]]:
    """The GPU generation whose package this machine gets (generation_for), and a note; None for conda-forge, no GPU."""
    caps = facts.driver.compute_caps
    if not ours(channels) or gates is None or vfile.cuda not in gates or not caps:
        return None, []
    generation = generation_for(dict(gates[vfile.cuda]), caps[0])
    archs = vfile.generations.get(generation, "")
    if generation == ALL_ARCHS:
        return generation, [note("generation", f"the all-architecture build ({archs}) is this machine's: "
                                 f"{vfile.display_path} has no generation build for its oldest GPU ({caps[0]})")]
    build = f"the {generation} build ({archs}) is this machine's"
    reported = facts.conda.virtual.get("__cuda_arch") if facts.conda is not None else None
    if facts.env.kind == "pixi" and not facts.env.this_project:
        text = (f"{build} (oldest GPU {caps[0]}): pixi takes it where the workspace declares the GPU (pixi 0.71+: "
                f"cuda = {{ driver = \"{vfile.cuda}\", arch = \"{caps[0]}\" }} on the platform), else the all-architecture build")
    elif facts.conda is None:
        text = (f"{build}: its oldest GPU is {caps[0]} (__cuda_arch); conda needs the nvidia-virtual-packages plugin or "
                "CONDA_OVERRIDE_CUDA_ARCH (in the command) to see it")
    elif reported:
        text = f"{build}, and conda {facts.conda.version} reports __cuda_arch={reported}: it takes the build of that GPU"
    else:
        text = (f"{build} (oldest GPU {caps[0]}), but conda {facts.conda.version} reports no __cuda_arch: it installs the "
                "all-architecture build (larger, the same kernels) unless told (CONDA_OVERRIDE_CUDA_ARCH, in the command); "
                "`conda install -n base -c conda-forge nvidia-virtual-packages` makes it see the GPU")
    return generation, [note("generation", text)]


def advise(facts: Facts, files: Sequence[VariantFile], versions: Mapping[str, str], channels: Sequence[str] = (DEFAULT_CHANNEL,),
           packages: Sequence[str] = (), gates: Mapping[str, Mapping[str, str | None]] | None = None) -> Advice:
    """`versions`: as the recipes render; `packages`: to install (default_package's); `gates`: generation_gates per CUDA."""
    chosen = {p: versions[p] for p in NAMES if p in (packages or (default_package(facts),))}
    findings = [f for rule in MACHINE_RULES for f in rule(facts, files)]
    vfile, reason = choose_variant(facts, files)
    if vfile is None:
        return Advice(findings=findings)
    torch = facts.interpreter.torch
    target = Target(vfile, facts.interpreter.minor or vfile.pythons[-1],
                    (torch.minor if torch is not None else None) or vfile.torches[-1], tuple(channels))
    findings += [f for rule in TARGET_RULES for f in rule(facts, target)]
    packaged = not any(f.unpackaged for f in findings)
    generation, generation_notes = machine_generation(facts, vfile, channels, gates)
    findings += generation_notes
    pinned = generation if generation and not (facts.env.kind == "pixi" and not facts.env.this_project) else None
    # conda-forge's builds, where it is the only channel, are cuda130py312h<hash>_<n>, one pytorch pin per release
    build_string = (build_glob(vfile, target.torch, pinned) if ours(channels)
                    else f"cuda{vfile.cuda.replace('.', '')}*py{target.python.replace('.', '')}*")
    findings += channel_notes(channels, chosen, build_string, packaged)
    arch_arg = build_arch_arg(facts.driver.compute_caps, vfile)
    archs = (f"--generation {generation}" if generation and generation != ALL_ARCHS
             else f"--generation {ALL_ARCHS}" if arch_arg == ALL_ARCHS else f"--arch {shlex.quote(arch_arg)}")
    build = (f"ssm-conda build {''.join(f'--package {p} ' for p in chosen if p != NAMES[0])}--cuda {vfile.cuda} "
             f"--torch {target.torch} {archs}")
    told = facts.conda is not None and "__cuda_arch" in facts.conda.virtual  # conda sees the GPU by itself
    cuda_arch = facts.driver.compute_caps[0] if pinned and pinned != ALL_ARCHS and not told else None
    install = install_commands(facts, vfile.cuda, build_string, channels, chosen, target.python, cuda_arch) if packaged else []
    return Advice(cuda=vfile.cuda, variant_file=vfile.display_path, python=target.python, torch=target.torch, reason=reason,
                  build_string=build_string, generation=generation, install=install, build=[build], findings=findings)
