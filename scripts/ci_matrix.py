"""Print the CI build matrix as JSON for GitHub Actions' fromJSON: one entry per file in variants/.

    python scripts/ci_matrix.py            # {"include": [{"name": "cuda129", "cuda": "12.9", ...}, ...]}
    python scripts/ci_matrix.py --github-output   # also append matrix=<json> to $GITHUB_OUTPUT

variants/ is the only list of variants: the workflow never repeats it.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import json
import os
from collections.abc import Sequence

from scripts.common import VARIANTS_DIR, PipelineError, UsageError, run_cli
from scripts.variants import VariantFile, load_variant_files


def matrix_entry(vfile: VariantFile) -> dict[str, object]:
    return {
        "name": vfile.path.stem,
        "file": vfile.display_path,
        "cuda": vfile.cuda,
        "cuda_major": vfile.cuda.split(".")[0],
        "variants": len(vfile.pythons) * len(vfile.torches),
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ci_matrix.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants-dir", default=str(VARIANTS_DIR), help="default: variants/")
    parser.add_argument("--github-output", action="store_true", help="append matrix=<json> to $GITHUB_OUTPUT")
    args = parser.parse_args(argv)
    text = json.dumps(build_matrix(Path(args.variants_dir)), separators=(",", ":"))
    print(text)
    if args.github_output:
        target = os.environ.get("GITHUB_OUTPUT")
        if not target:
            raise UsageError("--github-output needs $GITHUB_OUTPUT (set by GitHub Actions)")
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(f"matrix={text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
