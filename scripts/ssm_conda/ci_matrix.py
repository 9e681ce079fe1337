"""Print the CI build matrix as JSON for GitHub Actions' fromJSON: one entry per file in variants/.

    ssm-conda ci-matrix            # {"include": [{"name": "cuda129", "cuda": "12.9", ...}, ...]}
    ssm-conda ci-matrix --github-output   # also append matrix=<json> to $GITHUB_OUTPUT

variants/ is the only list of variants: the workflow never repeats it.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from ssm_conda.console import PipelineError, UsageError
from ssm_conda.matrix import Selection, VariantFile, load_variant_files, plan
from ssm_conda.paths import PACKAGES, VARIANTS_DIR


def matrix_entry(vfile: VariantFile) -> dict[str, object]:
    """A job, with how many packages it builds as rattler-build renders the recipes for the file."""
    planned = plan(Selection(cuda=vfile.cuda), files=[vfile])
    return {
        "name": vfile.path.stem,
        "file": vfile.display_path,
        "cuda": vfile.cuda,
        "cuda_major": vfile.cuda.split(".")[0],
        "variants": sum(v.package == PACKAGES[0] for v in planned),  # per package: they share variants/
        "packages": len(planned),
    }


def build_matrix(directory: Path = VARIANTS_DIR) -> dict[str, list[dict[str, object]]]:
    try:
        files = load_variant_files(directory)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise PipelineError(f"a file in {directory} is not a valid variant file: {exc}") from exc
    if not files:
        raise PipelineError(f"no variant files (*.yaml) in {directory}")
    names = [f.path.stem for f in files]
    if len(set(names)) != len(names):
        raise PipelineError(f"duplicate variant file names in {directory}: {names}")
    return {"include": [matrix_entry(f) for f in files]}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variants-dir", default=str(VARIANTS_DIR), help="default: variants/")
    parser.add_argument("--github-output", action="store_true", help="append matrix=<json> to $GITHUB_OUTPUT")


def run(args: argparse.Namespace) -> int:
    text = json.dumps(build_matrix(Path(args.variants_dir)), separators=(",", ":"))
    print(text)
    if args.github_output:
        target = os.environ.get("GITHUB_OUTPUT")
        if not target:
            raise UsageError("--github-output needs $GITHUB_OUTPUT (set by GitHub Actions)")
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(f"matrix={text}\n")
    return 0
