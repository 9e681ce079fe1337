"""Follow a channel's pytorch builds: set each variant file's pytorch minors to those the channel
builds with the file's CUDA version, on every platform where the recipes render the file's variants;
propose a variant file for a CUDA line the channel builds pytorch with and variants/ lacks, and delete
the file of a line the channel builds no pytorch with any more.

    ssm-conda-dev sync-matrix                      # conda-forge; rewrites, adds and deletes files in variants/
    ssm-conda-dev sync-matrix --dry-run            # print what would change (a new file in full), write nothing
    ssm-conda-dev sync-matrix --channel ./channel --oldest 2.11

A minor counts where a channel has a pytorch build whose build string says that CUDA version
(conda-forge's cuda130_generic_py312_h..._200) on each platform where the recipes render variants of
the file (their build.skip decides: CUDA 12.9 has none on win-64, so no win-64 pytorch is asked of it;
--target-platform: that one alone), and is not older than --oldest
(default: the oldest the file lists now, so the matrix grows with new releases and never reaches
back by itself). Only the list items change: comments and everything else stay as written.

CUDA lines. A line (the build strings' cudaXY, X.Y with a one-digit minor) with builds of minors no older
than --oldest (default: the oldest minor of variants/) on every platform where the recipes would render
it, and no variant file, gets a new file, variants/cudaXY.yaml, written like cuda130.yaml from LINES
below: conda-forge's compilers and glibc for the line, pytorch's all-architecture list per platform, split
into generations by GENERATIONS. A file whose line has no build of any minor left on any platform where
the recipes render it is deleted. A line the channel still has builds of is never dropped, even when
newer minors skip it: conda-forge keeps old builds, and users of them keep our packages (a note says so).
"""

from __future__ import annotations

import argparse
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ssm_conda import options
from ssm_conda.archs import version_key
from ssm_conda.channels import fetch_repodata
from ssm_conda.console import PipelineError, UsageError
from ssm_conda.matrix import PLATFORMS, TORCH_RE, VariantFile, load_variant_files, plan
from ssm_conda.paths import cache_dir
from ssm_conda.selection import Selection

CUDA_BUILD_RE = re.compile(r"cuda(\d+)_")  # conda-forge's pytorch build strings start so; CPU ones with cpu_
PYTORCH_LIST_RE = re.compile(r'^pytorch:[ \t]*\n((?:[ \t]+-[ \t]*"?[\w.]+"?[ \t]*\n)+)', re.M)
CUDA_VERSION_RE = re.compile(r'^(cuda_compiler_version:[ \t]*\n[ \t]+-[ \t]*)"?[\d.]+"?', re.M)


@dataclass(frozen=True)
class Line:
    """What a variant file of one CUDA line takes from conda-forge."""

    compiler: str  # gcc and gxx on Linux (conda-forge-pinning's zip of c/cxx_compiler_version with cuda_compiler_version)
    stdlib: str  # sysroot, glibc (the same zip's c_stdlib_version)
    arch_lists: dict[str, str]  # platform -> pytorch-cpu-feedstock's TORCH_CUDA_ARCH_LIST ("linux-64" stands for the rest)
    nvcc_archs: str  # every real architecture this nvcc targets (nvcc --list-gpu-code)
    windows: bool  # conda-forge builds pytorch with it on win-64 (the file then names vs2022 there, as cuda130.yaml)
    source: str  # where the values come from: written into the file's comments


LINES = {
    # conda-forge-pinning-feedstock f87504532b70 (2026-08-20) recipe/migrations/cuda130.yaml: cuda_compiler_version
    # 13.0 with c/cxx_compiler_version 15, c_stdlib_version 2.28 (linux x86_64 and aarch64, win64 for CUDA);
    # pytorch-cpu-feedstock 74dd3d46 (2026-08-13) recipe/build.sh (13.0: 7.5;...;12.0+PTX, 8.7 added on
    # linux-aarch64) and recipe/bld.bat (13.0: linux-64's list). nvcc 13.0's real architectures: variants/cuda130.yaml.
    "13.0": Line("15", "2.28", {"linux-64": "7.5;8.0;8.6;9.0;10.0;11.0;12.0+PTX",
                                "linux-aarch64": "7.5;8.0;8.6;8.7;9.0;10.0;11.0;12.0+PTX"},
                 "7.5;8.0;8.6;8.7;8.8;8.9;9.0;10.0;10.3;11.0;12.0;12.1", windows=True,
                 source="conda-forge-pinning's cuda130 migration: gcc 15, sysroot 2.28; pytorch-cpu-feedstock "
                        "recipe/build.sh's TORCH_CUDA_ARCH_LIST for CUDA 13.0"),
    # conda-forge-pinning-feedstock PR #8926 (merged 2026-09-09, "CUDA 13.4 migration / Pinning bump") replaces 13.0 by
    # 13.4 in the pinning, which keeps 13.0's zip: gcc 15, sysroot 2.28 (issue 43's facts). ASSUMED, not read: the stored
    # snapshots of both feedstocks predate it (pinning f87504532b70 has no cuda134 migration; pytorch's build.sh at
    # 74dd3d46 has no 13.4 case and exits for it), so the arch lists and nvcc's architectures are 13.0's, on PR #8926's
    # word that "there are no new architectures to target with CUDA 13.4". Check build.sh's 13.4 case when it lands.
    "13.4": Line("15", "2.28", {"linux-64": "7.5;8.0;8.6;9.0;10.0;11.0;12.0+PTX",
                                "linux-aarch64": "7.5;8.0;8.6;8.7;9.0;10.0;11.0;12.0+PTX"},
                 "7.5;8.0;8.6;8.7;8.8;8.9;9.0;10.0;10.3;11.0;12.0;12.1", windows=True,
                 source="conda-forge-pinning PR #8926 (13.0 replaced by 13.4, its zip kept): gcc 15, sysroot 2.28; "
                        "pytorch-cpu-feedstock recipe/build.sh's list for CUDA 13.0, which PR #8926 says 13.4 adds nothing to"),
}
FLOOR = (7, 5)  # upstream's oldest architecture: "all" starts there, whatever older ones pytorch carries
LEFT_OUT = {"10.3"}  # nvcc 13 miscompiles sm_103 (upstream #105) and sm_100 code runs there (cuda130.yaml)
# The generations a file splits into (cuda130.yaml): one per major named here, of the members of the
# all-architecture list with that major, PTX on the newest. Other majors (7.5, the floor; 11.0, Jetson Thor)
# get the all-architecture package alone. The names are the recipes' and the docs'.
GENERATIONS = {8: "sm8x", 9: "sm90", 10: "sm10x", 12: "sm12x"}


def line_of(key: str) -> str:
    """A build string's CUDA key as a version: "134" -> "13.4" (conda-forge drops the dot; minors have one digit)."""
    return f"{key[:-1]}.{key[-1]}"


def arch_lists(line: Line, platform: str) -> dict[str, str]:
    """gpu_generation -> TORCH_CUDA_ARCH_LIST on a platform, "all" first, from pytorch's list for it."""
    entries = [e.removesuffix("+PTX") for e in line.arch_lists.get(platform, line.arch_lists["linux-64"]).split(";")]
    kept = [e for e in entries if version_key(e) >= FLOOR and e not in LEFT_OUT]
    lists = {"all": ";".join(kept) + "+PTX"}
    for major, name in GENERATIONS.items():
        if members := [e for e in kept if version_key(e)[0] == major]:
            lists[name] = ";".join(members) + "+PTX"
    return lists


def quoted(values: list[str], indent: str = "  ") -> str:
    return "".join(f'{indent}- "{v}"\n' for v in values)


def new_file_text(cuda: str, line: Line, pythons: list[str], minors: list[str], channels: tuple[str, ...]) -> str:
    """variants/cudaXY.yaml for a line, in cuda130.yaml's keys and comment style."""
    key = cuda.replace(".", "")
    x86, arm = arch_lists(line, "linux-64"), arch_lists(line, "linux-aarch64")
    supported = ";".join(a for a in line.nvcc_archs.split(";") if a not in LEFT_OUT)

    def selected(unix: str, win: str | None) -> str:
        return f"  - if: win\n    then: {win}\n    else: {unix}\n" if line.windows and win else f"  - {unix}\n"

    def unix_only(value: str) -> str:
        return f'  - if: unix\n    then: "{value}"\n' if line.windows else f'  - "{value}"\n'

    if x86 == arm:
        generations = quoted(list(x86.values()))
    else:
        generations = ("  - if: aarch64\n    then:\n" + quoted(list(arm.values()), "      ")
                       + "    else:\n" + quoted(list(x86.values()), "      "))
    if list(x86) != list(arm):
        raise PipelineError(f"CUDA {cuda}: linux-64 and linux-aarch64 split into different generations "
                            f"({', '.join(x86)} / {', '.join(arm)}); write variants/cuda{key}.yaml by hand")
    pytorch_all = line.arch_lists["linux-64"] + "".join(
        f" ({p}: {v})" for p, v in line.arch_lists.items() if p != "linux-64")
    return (
        f"# CUDA {cuda} variants of causal-conv1d and mamba-ssm: one package per pytorch minor x GPU generation\n"
        "# below, each for every CPython from the python below on.\n"
        f"# Usable as `rattler-build build -m variants/cuda{key}.yaml` and `conda build -m variants/cuda{key}.yaml`.\n"
        f"# Proposed by `ssm-conda-dev sync-matrix`: {', '.join(channels)} builds pytorch with CUDA {cuda}.\n"
        "#\n"
        f"# Compilers and glibc are the ones conda-forge pairs with CUDA {cuda} (conda-forge-pinning\n"
        f"# zip_keys: gcc {line.compiler}, sysroot {line.stdlib}). Source: {line.source}.\n"
        "cuda_compiler:\n  - cuda-nvcc\n"
        f'cuda_compiler_version:\n  - "{cuda}"\n'
        "c_compiler:\n" + selected("gcc", "vs2022")
        + "c_compiler_version:\n" + unix_only(line.compiler)
        + "cxx_compiler:\n" + selected("gxx", "vs2022")
        + "cxx_compiler_version:\n" + unix_only(line.compiler)
        + "c_stdlib:\n" + selected("sysroot", "vs")
        + "c_stdlib_version:\n" + unix_only(line.stdlib)
        + "\n# The oldest CPython conda-forge builds for (its python_min): each package is built once with it and\n"
        "# installs on it and every later CPython (the recipes are conda-forge abi3 packages: python-abi3).\n"
        "python:\n" + quoted(pythons)
        + f"\n# Every pytorch minor conda-forge builds with CUDA {cuda} on each platform the recipes render it for\n"
        f"# (sync-matrix keeps this list). Check with\n"
        f'# `conda search -c conda-forge "pytorch={minors[-1]}=cuda{key}*"` before adding or dropping a minor.\n'
        "pytorch:\n" + quoted(minors)
        + "\n# GPU architectures (TORCH_CUDA_ARCH_LIST syntax): one package per entry of gpu_generation, zipped\n"
        f"# with its list. \"all\" carries what conda-forge's pytorch carries for CUDA {cuda}, from 7.5 (upstream's\n"
        f"# floor) on: pytorch-cpu-feedstock recipe/build.sh sets {pytorch_all}.\n"
        "# sm_103 stays out: nvcc 13 miscompiles it (upstream #105), and sm_100 code runs there.\n"
        "# This file splits by generation as cuda130.yaml does: each other entry is one major compute\n"
        "# capability of that list, with PTX for its newest member; a GPU of another generation (7.5, 11.0)\n"
        "# gets the all-architecture package.\n"
        "gpu_generation:\n" + "".join(f"  - {g}\n" for g in x86)
        + "cuda_arch_list:\n" + generations
        + f"# Every real architecture this nvcc can target, less 10.3 for the reason above; `ssm-conda build\n"
        "# --arch` accepts these.\n"
        f'cuda_arch_supported:\n  - "{supported}"\n'
        "# 1 compiles with nvcc -lineinfo: source-line tables for Nsight Compute and compute-sanitizer,\n"
        "# which make the packages larger (README: \"GPU code\") and do nothing at run time\n"
        "# (`ssm-conda build --line-info`).\n"
        'nvcc_lineinfo:\n  - "0"\n'
        "\nzip_keys:\n"
        "  - [c_compiler_version, cxx_compiler_version, c_stdlib_version, cuda_compiler_version, cuda_arch_supported]\n"
        "  - [gpu_generation, cuda_arch_list]\n"
    )


def cuda_minors(channels: tuple[str, ...], platforms: tuple[str, ...]) -> dict[str, dict[str, set[str]]]:
    """platform -> CUDA version without the dot ("130") -> the pytorch minors with a build for it there (in any channel)."""
    found: dict[str, dict[str, set[str]]] = {}
    for platform in platforms:
        repodatas = [fetch_repodata(channel, platform, cache=cache_dir() / "repodata") for channel in channels]
        here = found.setdefault(platform, {})
        for record in (r for repodata in repodatas if repodata is not None for r in repodata.load_records("pytorch")):
            match = CUDA_BUILD_RE.match(str(record.build))
            if match:
                here.setdefault(match[1], set()).add(".".join(str(record.version).split(".")[:2]))
    return found


def rendered_on(directory: Path, platforms: tuple[str, ...]) -> dict[Path, list[str]]:
    """Each variant file -> the platforms (of those given) where the recipes render any variant of it."""
    where: dict[Path, list[str]] = {}
    for platform in platforms:
        for vfile in load_variant_files(directory, platform):
            if plan(Selection(cuda=vfile.cuda), files=[vfile], target_platform=platform):
                where.setdefault(vfile.path, []).append(platform)
    return where


def rewritten(vfile: VariantFile, minors: list[str]) -> str:
    """The file's text with its top-level pytorch list replaced, in the file's own item style."""
    text = vfile.path.read_text()
    block = PYTORCH_LIST_RE.search(text)
    if block is None:
        raise PipelineError(f"{vfile.display_path}: no plain `pytorch:` list of minors to rewrite (edit it by hand)")
    indent = re.match(r"[ \t]+-[ \t]*", block[1])[0]  # type: ignore[index]
    quote = '"' if '"' in block[1] else ""
    items = "".join(f"{indent}{quote}{minor}{quote}\n" for minor in minors)
    return text[: block.start(1)] + items + text[block.end(1) :]


def configure(parser: argparse.ArgumentParser) -> None:
    options.add_channels(parser, "a channel whose pytorch builds count")
    parser.add_argument("--target-platform", choices=PLATFORMS,
                        help=f"the conda platform whose builds alone count (default: each of {', '.join(PLATFORMS)} "
                             "where the recipes render the file's variants)")
    parser.add_argument("--oldest", help="the oldest minor to keep (default: each file's oldest)")
    options.add_variants_dir(parser)
    parser.add_argument("--dry-run", action="store_true", help="print what would change; write nothing")


def minors_on(available: dict[str, dict[str, set[str]]], key: str, on: list[str], oldest: tuple[int, ...]) -> list[str]:
    """The minors no older than `oldest` with a build of CUDA `key` on every platform of `on`, ascending."""
    built = set.intersection(*(available.get(p, {}).get(key, set()) for p in on))
    return sorted((m for m in built if version_key(m) >= oldest), key=version_key)


def new_lines(args: argparse.Namespace, files: list[VariantFile], available: dict[str, dict[str, set[str]]],
              platforms: tuple[str, ...], channels: tuple[str, ...]) -> dict[Path, str]:
    """variants/cudaXY.yaml -> its text, for each line the channel builds pytorch >= --oldest with and variants/ lacks."""
    known = {f.cuda for f in files}
    oldest = version_key(args.oldest or min((t for f in files for t in f.torches), key=version_key))
    template = max(files, key=lambda f: version_key(f.cuda))  # only to ask the recipes where a line renders
    proposed, old = {}, []
    for key in sorted({k for found in available.values() for k in found}, key=lambda k: version_key(line_of(k))):
        if (cuda := line_of(key)) in known:
            continue
        with tempfile.TemporaryDirectory() as scratch:
            probe = Path(scratch) / f"cuda{key}.yaml"
            probe.write_text(CUDA_VERSION_RE.sub(lambda m: f'{m[1]}"{cuda}"', template.path.read_text(), count=1))
            on = rendered_on(Path(scratch), platforms).get(probe, [])
        if not on:
            print(f"CUDA {cuda}: the recipes render no variant of it on {', '.join(platforms)} (not added)")
            continue
        if not (minors := minors_on(available, key, on, oldest)):
            here = {m for p in on for m in available.get(p, {}).get(key, set())}
            if any(version_key(m) >= oldest for m in here):
                print(f"CUDA {cuda}: not every one of {', '.join(on)} has a pytorch >= {'.'.join(map(str, oldest))} "
                      "built with it yet (not added)")
            elif here:
                old.append(cuda)
            else:
                print(f"CUDA {cuda}: no pytorch built with it on {', '.join(on)}, where the recipes render it (not added)")
            continue
        if (line := LINES.get(cuda)) is None:
            raise PipelineError(f"{', '.join(channels)} builds pytorch {', '.join(minors)} with CUDA {cuda}, which "
                                f"sync_matrix.py's LINES does not describe (compilers, glibc, arch lists): add it; "
                                "nothing was written")
        path = args.variants_dir / f"cuda{key}.yaml"
        proposed[path] = new_file_text(cuda, line, template.pythons, minors, channels)
        print(f"variants/{path.name}: new, CUDA {cuda} with pytorch {', '.join(minors)} (built on {', '.join(on)})")
    if old:
        print(f"CUDA {', '.join(old)}: only pytorch older than {'.'.join(map(str, oldest))} (not added)")
    return proposed


def run(args: argparse.Namespace) -> int:
    if args.oldest is not None and not TORCH_RE.fullmatch(args.oldest):
        raise UsageError(f"--oldest {args.oldest!r} is not a pytorch minor; accepted: X.Y, e.g. 2.12")
    channels = options.channels(args.channel)
    platforms = (args.target_platform,) if args.target_platform else PLATFORMS
    files = load_variant_files(args.variants_dir)  # bad files before any download
    if not files:
        raise UsageError(f"no variant files (*.yaml) in {args.variants_dir}")
    where = rendered_on(args.variants_dir, platforms)  # the recipes' build.skip: no win-64 for CUDA 12.9
    available = cuda_minors(channels, platforms)
    if not any(available.values()):
        raise PipelineError(f"{', '.join(channels)} has no CUDA build of pytorch on {', '.join(platforms)}; "
                            "nothing was written")
    changes: dict[Path, str | None] = {}  # None: delete the file
    added: dict[str, Path] = {}
    dropped: dict[str, Path] = {}
    cuda_built = {p: {m for ms in found.values() for m in ms} for p, found in available.items()}
    for vfile in files:
        if not (on := where.get(vfile.path)):
            print(f"{vfile.display_path}: the recipes render no variant of it on {', '.join(platforms)} (left as is)")
            continue
        cuda = vfile.cuda.replace(".", "")
        if not any(available.get(p, {}).get(cuda) for p in on):
            changes[vfile.path], dropped[vfile.cuda] = None, vfile.path
            print(f"{vfile.display_path}: {', '.join(channels)} has no pytorch built with CUDA {vfile.cuda} on "
                  f"{', '.join(on)} (dropped: the file is deleted)")
            continue
        oldest = version_key(args.oldest or min(vfile.torches, key=version_key))
        if not (minors := minors_on(available, cuda, on, oldest)):
            raise PipelineError(f"{', '.join(channels)} has no pytorch >= {'.'.join(map(str, oldest))} built with CUDA "
                                f"{vfile.cuda} on {', '.join(on)}; nothing was written")
        newest = max(set.intersection(*(cuda_built.get(p, set()) for p in on)), key=version_key)
        if version_key(newest) > version_key(minors[-1]):  # what the rule above cannot see: old builds stay
            print(f"{vfile.display_path}: note: pytorch {newest} has CUDA builds on {', '.join(on)}, none with "
                  f"CUDA {vfile.cuda} (if conda-forge retired the line, delete the file by hand)")
        more, fewer = sorted(set(minors) - set(vfile.torches)), sorted(set(vfile.torches) - set(minors))
        if not more and not fewer:
            print(f"{vfile.display_path}: pytorch {', '.join(vfile.torches)} (unchanged)")
            continue
        changes[vfile.path] = rewritten(vfile, minors)
        print(f"{vfile.display_path}: pytorch {', '.join(vfile.torches)} -> {', '.join(minors)}"
              + (f"; added {', '.join(more)}" if more else "")
              + (f"; dropped {', '.join(fewer)} (no CUDA {vfile.cuda} build on {', '.join(on)})" if fewer else ""))
    for path, text in new_lines(args, files, available, platforms, channels).items():
        changes[path], added[line_of(path.stem.removeprefix("cuda"))] = text, path
    if dropped and not added and len(dropped) == len(files):
        raise PipelineError(f"every variant file would be deleted ({', '.join(p.name for p in dropped.values())}): "
                            f"{', '.join(channels)} builds pytorch with none of their CUDA lines; nothing was written")
    if added or dropped:
        print("CUDA lines: " + "; ".join(
            [f"added {c} (variants/{p.name})" for c, p in added.items()]
            + [f"dropped {c} (variants/{p.name})" for c, p in dropped.items()]))
    if args.dry_run or not changes:
        for path in added.values():
            print(f"--- variants/{path.name} (new)\n{changes[path]}", end="")
        print("dry run: nothing written" if args.dry_run and changes else "nothing to change")
        return 0
    for path, text in changes.items():  # every file checked before any is written
        if text is None:
            path.unlink()
            continue
        temporary = path.with_suffix(".yaml.tmp")
        temporary.write_text(text)
        temporary.replace(path)
    rewrote = len(changes) - len(added) - len(dropped)
    print(f"rewrote {rewrote} file(s), added {len(added)}, deleted {len(dropped)}")
    return 0
