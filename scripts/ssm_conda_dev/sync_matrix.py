"""Follow a channel's pytorch builds: set each variant file's pytorch minors to those the channel
builds with the file's CUDA version, on every platform where the recipes render the file's variants.

    ssm-conda-dev sync-matrix                      # conda-forge; rewrites the pytorch lists in variants/
    ssm-conda-dev sync-matrix --dry-run            # print what would change, write nothing
    ssm-conda-dev sync-matrix --channel ./channel --oldest 2.11

A minor counts where a channel has a pytorch build whose build string says that CUDA version
(conda-forge's cuda130_generic_py312_h..._200) on each platform where the recipes render variants of
the file (their build.skip decides: CUDA 12.9 has none on win-64, so no win-64 pytorch is asked of it;
--target-platform: that one alone), and is not older than --oldest
(default: the oldest the file lists now, so the matrix grows with new releases and never reaches
back by itself). Only the list items change: comments and everything else stay as written.
"""

from __future__ import annotations

import argparse
import re
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


def run(args: argparse.Namespace) -> int:
    if args.oldest is not None and not TORCH_RE.fullmatch(args.oldest):
        raise UsageError(f"--oldest {args.oldest!r} is not a pytorch minor; accepted: X.Y, e.g. 2.12")
    channels = options.channels(args.channel)
    platforms = (args.target_platform,) if args.target_platform else PLATFORMS
    files = load_variant_files(args.variants_dir)  # bad files before any download
    if not files:
        raise UsageError(f"no variant files (*.yaml) in {args.variants_dir}")
    where = rendered_on(args.variants_dir, platforms)  # the recipes' build.skip: no win-64 for CUDA 12.9
    available = cuda_minors(channels, tuple(p for p in platforms if any(p in ps for ps in where.values())))
    changes: dict[Path, str] = {}
    for vfile in files:
        if not (on := where.get(vfile.path)):
            print(f"{vfile.display_path}: the recipes render no variant of it on {', '.join(platforms)} (left as is)")
            continue
        cuda = vfile.cuda.replace(".", "")
        oldest = version_key(args.oldest or min(vfile.torches, key=version_key))
        built = set.intersection(*(available[p].get(cuda, set()) for p in on))
        minors = sorted((m for m in built if version_key(m) >= oldest), key=version_key)
        if not minors:
            raise PipelineError(f"{', '.join(channels)} has no pytorch >= {'.'.join(map(str, oldest))} built with CUDA "
                                f"{vfile.cuda} on {', '.join(on)}; nothing was written")
        added, dropped = sorted(set(minors) - set(vfile.torches)), sorted(set(vfile.torches) - set(minors))
        if not added and not dropped:
            print(f"{vfile.display_path}: pytorch {', '.join(vfile.torches)} (unchanged)")
            continue
        changes[vfile.path] = rewritten(vfile, minors)
        print(f"{vfile.display_path}: pytorch {', '.join(vfile.torches)} -> {', '.join(minors)}"
              + (f"; added {', '.join(added)}" if added else "")
              + (f"; dropped {', '.join(dropped)} (no CUDA {vfile.cuda} build on {', '.join(on)})" if dropped else ""))
    if args.dry_run or not changes:
        print("dry run: nothing written" if args.dry_run and changes else "nothing to change")
        return 0
    for path, text in changes.items():  # every file checked before any is written
        temporary = path.with_suffix(".yaml.tmp")
        temporary.write_text(text)
        temporary.replace(path)
    print(f"rewrote {len(changes)} file(s)")
    return 0
