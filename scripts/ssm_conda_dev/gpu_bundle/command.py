"""Make the GPU check: one file to copy onto a GPU node that has a Python with pip's CUDA torch and nothing else
(no conda, no network, no compiler), and run there with that Python.

    ssm-conda-dev gpu-bundle                       # CUDA 13.0, torch 2.11, sm90, Python 3.10+: output/ -> gpu-check-....pyz
    python3 gpu-check-cuda130-py310-torch211-sm90.pyz   # on the node: tests, benchmark, ./gpu-check-results/

It takes the causal-conv1d and mamba-ssm packages of one variant from the output channel, each checked whole
first, and writes a zip application: the packages' site-packages files and their test files (as `rattler-build
test` lays them out), their test sections (info/tests/tests.yaml, as JSON), the kernel benchmark with what its
table needs (rich), and the runner (gpu_bundle/runner.py, standard library only) as its __main__.py. Bad input is
one line and no file; a bundle over 48 MiB is refused, and nothing half-written is left."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from ssm_conda import options
from ssm_conda.channels import check_archive, find_packages, name_and_build_of
from ssm_conda.console import Outcome, UsageError, human_size, print_summary
from ssm_conda.matrix import PlannedVariant, choose_built, plan
from ssm_conda.selection import Selection, without_hash

import ssm_conda_dev

RUNNER = Path(__file__).with_name("runner.py")
LIMIT = 48 * 2**20  # well under the 64 MiB a GPU node's session takes in
# What the benchmark imports, by module path below scripts/ (ssm-conda-dev's parser, the benchmark, the table)
BENCHMARK = ("ssm_conda/__init__.py", "ssm_conda/console.py", "ssm_conda/cli.py", "ssm_conda/paths.py",
             "ssm_conda_dev/__init__.py", "ssm_conda_dev/__main__.py", "ssm_conda_dev/cli.py",
             *(f"ssm_conda_dev/benchmarks/{name}.py" for name in ("__init__", "kernels", "kernel_cases",
                                                                  "causal_conv1d_ops", "selective_scan_ops")))
# A package's files the node needs: its Python modules and extension, and its test files (etc/conda/test-files/NAME/)
TAKEN = ("site-packages/", "etc/conda/test-files/")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cuda", default="13.0", help="the variant's CUDA version (default 13.0: pip's torch +cu130)")
    parser.add_argument("--python", help="the variant's Python X.Y (default: the variant file's); the packages run on it "
                        "and every later Python, the node's")
    parser.add_argument("--torch", default="2.11", help="the variant's pytorch minor, the node's torch (default 2.11)")
    parser.add_argument("--generation", action="append", help="the variant's GPU generation, the node's GPU (default "
                        "sm90: an H100), or all; once (a bundle holds one variant)")
    options.add_output_dir(parser, "holding the built packages")
    parser.add_argument("--bundle", type=Path, metavar="FILE",
                        help="the file to write (default: gpu-check-VARIANT.pyz in the current folder)")


@dataclass(frozen=True)
class BundleOptions:
    selection: Selection
    output_dir: Path
    bundle: Path | None  # None: named after the variant

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BundleOptions:
        if len(generations := args.generation or ["sm90"]) > 1:
            raise UsageError(f"--generation {' '.join(generations)}: name one (a bundle holds one variant's packages)")
        selection = Selection(cuda=args.cuda, python=args.python, torch=args.torch, generations=tuple(generations))
        if args.bundle is not None and (args.bundle.is_dir() or not args.bundle.parent.is_dir()):
            raise UsageError(f"--bundle {args.bundle}: name a file in an existing folder")
        return cls(selection, options.output_folder(args.output_dir), args.bundle)


def vendored(python: str) -> list[tuple[Path, str]]:
    """(file, its name in the bundle's lib/) of rich and what it requires on Python `python`: the benchmark's table."""
    todo, seen, files = ["rich"], set(), []
    while todo:
        dist = importlib.metadata.distribution(todo.pop())
        if dist.metadata["Name"].lower() in seen:
            continue
        seen.add(dist.metadata["Name"].lower())
        todo += [r.name for r in map(Requirement, dist.requires or [])
                 if r.marker is None or r.marker.evaluate({"python_version": python, "extra": ""})]
        files += [(Path(dist.locate_file(f)), f"lib/{f}") for f in dist.files or []
                  if not str(f).startswith("..") and "__pycache__" not in f.parts]
    return files


def package_files(unpacked: Path, name: str) -> list[tuple[Path, str]]:
    """(file, its name in the bundle's prefix/) of what the node needs of one unpacked package: regular files only."""
    return [(path, f"prefix/{relative}") for path in sorted(unpacked.rglob("*"))
            if path.is_file() and not path.is_symlink()
            and (relative := path.relative_to(unpacked).as_posix()).startswith(TAKEN)
            and (not relative.startswith(TAKEN[1]) or relative.startswith(f"{TAKEN[1]}{name}/"))]


def node_tests(tests: list[dict]) -> list[dict]:
    """The test section less its abi3audit step: it reads the library's symbols, as the build did, and needs a tool the
    node lacks."""
    return [t for t in tests if "abi3audit" not in t.get("requirements", {}).get("run", [])]


def variant_facts(variant: PlannedVariant) -> dict:
    """What the runner checks the node against: Python, torch minor, CUDA, the GPU generation and its gate."""
    gate = next((r.split(maxsplit=1)[1] for r in variant.rendered.recipe.requirements.run if r.startswith("__cuda_arch ")),
                None)
    return {"label": variant.label, "cuda": variant.cuda, "python": variant.python, "torch": variant.torch,
            "generation": variant.generation, "archs": [a.removesuffix("+PTX") for a in variant.archs.split(";")],
            "cuda_arch": gate}


def chosen_packages(bundle: BundleOptions) -> list[tuple[PlannedVariant, Path]]:
    """The variant's package of each name in the output channel (the newest where several builds lie there)."""
    variants = plan(bundle.selection)
    found = choose_built(find_packages([bundle.output_dir]) if bundle.output_dir.is_dir() else [],
                         lambda p: name_and_build_of(p.name), bundle.selection)
    chosen = []
    for variant in variants:
        mine = sorted((p for p in found if name_and_build_of(p.name)[0] == variant.package), key=lambda p: p.stat().st_mtime)
        if not mine:
            raise UsageError(f"no {variant.package} package of {variant.label} in {bundle.output_dir}: build it with "
                             f"ssm-conda build --cuda {variant.cuda} --python {variant.python} --torch {variant.torch} "
                             f"--generation {variant.generation}")
        chosen.append((variant, mine[-1]))
    return chosen


def run(args: argparse.Namespace) -> int:
    bundle = BundleOptions.from_args(args)
    chosen = chosen_packages(bundle)
    facts = variant_facts(chosen[0][0])
    target = bundle.bundle or Path(f"gpu-check-{without_hash(chosen[0][0].build_string).replace('_', '-')}.pyz")
    outcomes, members, manifest = [], [], {"variant": facts, "packages": []}
    with tempfile.TemporaryDirectory(prefix="ssm-conda-gpu-bundle-") as scratch:
        for variant, path in chosen:
            unpacked = Path(scratch, variant.package)
            try:
                index = check_archive(path, unpacked)
            except ValueError as exc:
                raise UsageError(f"{path}: {exc}") from None
            tests = unpacked / "info" / "tests" / "tests.yaml"
            if not tests.is_file():
                raise UsageError(f"{path}: it records no test section (info/tests/tests.yaml): built without its tests?")
            manifest["packages"].append({"name": index.name.normalized, "version": str(index.version), "build": str(index.build),
                                         "file": path.name, "tests": node_tests(yaml.safe_load(tests.read_text()))})
            members += package_files(unpacked, variant.package)
            outcomes.append(Outcome(variant.package, variant.label, "ok", size=path.stat().st_size, path=path))
        scripts = Path(ssm_conda_dev.__file__).resolve().parents[1]
        members += [(scripts / name, f"lib/{name}") for name in BENCHMARK] + vendored(facts["python"])
        write_bundle(target, manifest, members)
    outcomes.append(Outcome("bundle", facts["label"], "ok", size=target.stat().st_size, path=target))
    print_summary(outcomes)
    print(f"on the GPU node: python3 {target.name}   (Python {facts['python']}+, torch {facts['torch']}, CUDA {facts['cuda']}, "
          f"a GPU of {facts['generation']}; results in ./gpu-check-results)")
    return 0


def write_bundle(target: Path, manifest: dict, members: list[tuple[Path, str]]) -> None:
    """The zip application, written beside `target` and renamed into place once whole and within LIMIT."""
    partial = target.with_name(f".{target.name}.partial")
    try:
        with zipfile.ZipFile(partial, "w") as archive:
            # zipimport reads only stored or deflated members: the runner's; the rest, read by zipfile, with LZMA
            archive.writestr("__main__.py", RUNNER.read_text(), compress_type=zipfile.ZIP_DEFLATED)
            archive.writestr("manifest.json", json.dumps(manifest, indent=1), compress_type=zipfile.ZIP_DEFLATED)
            for path, name in members:
                archive.write(path, name, compress_type=zipfile.ZIP_LZMA)
        if (size := partial.stat().st_size) > LIMIT:
            raise UsageError(f"the bundle would be {human_size(size)}, over the {human_size(LIMIT)} a GPU node takes in: "
                             "bundle one generation's packages (--generation), not the all-architecture ones")
        partial.replace(target)
    except OSError as exc:
        raise UsageError(f"--bundle {target}: cannot write it ({exc.strerror})") from None
    finally:
        partial.unlink(missing_ok=True)
