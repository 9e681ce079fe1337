"""Small pieces every CLI in this package shares: paths, errors, tables, sizes."""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
RECIPE_DIR = REPO_ROOT / "recipe"
RECIPE = RECIPE_DIR / "recipe.yaml"
VARIANTS_DIR = REPO_ROOT / "variants"
DEFAULT_CHANNEL = "conda-forge"


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit status 2, nothing written."""


class PipelineError(Exception):
    """A step failed for a reason outside the user's input (exit status 1)."""


def run_cli(main: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None = None) -> int:
    """Run a CLI entry point, turning our errors into one line on stderr and an exit status."""
    try:
        return main(argv)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def exit_without_finalizing(status: int) -> None:
    """End a CLI that ran py-rattler or py-rattler-build: flush, then leave without finalizing.

    Their Rust worker threads can outlive the work and touch Python while the interpreter
    finalizes: build.py saw "PyGILState_Release" aborts (exit -6), and offline_channel.py once
    died with SIGSEGV in CI, both after a finished, reported run. Everything is written by now.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def human_size(num_bytes: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if num_bytes < 1000 or unit == "GB":
            return f"{num_bytes:.0f} {unit}" if unit == "B" else f"{num_bytes:.1f} {unit}"
        num_bytes /= 1000
    raise AssertionError("unreachable")


def human_duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{seconds:.1f}s"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain-text table with aligned columns, as a string."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def one_of(kind: str, value: str, accepted: Sequence[str]) -> UsageError:
    """The standard error for a value outside a known set."""
    return UsageError(f"unknown {kind} {value!r}; accepted: {', '.join(accepted)}")
