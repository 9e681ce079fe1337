"""What every subcommand shares on the terminal: errors and exit codes, tables, sizes and durations."""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from rich.console import Console
from rich.table import Table


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit status 2, nothing written."""


class PipelineError(Exception):
    """A step failed for a reason outside the user's input (exit status 1)."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports a bad command line as one line (UsageError), not usage text + exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def exit_without_finalizing(status: int) -> None:
    """Exit without finalizing: py-rattler's Rust threads may touch Python as the interpreter finalizes (aborts, SIGSEGV)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def human_size(num_bytes: float) -> str:
    for unit in ("B", "KB", "MB"):
        if num_bytes < 1000:
            return f"{num_bytes:.0f} {unit}" if unit == "B" else f"{num_bytes:.1f} {unit}"
        num_bytes /= 1000
    return f"{num_bytes:.1f} GB"


def human_duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{seconds:.1f}s"


def make_table(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None) -> Table:
    table = Table(*headers, title=title, box=None, header_style="bold", pad_edge=False)
    for row in rows:
        table.add_row(*(str(c) for c in row))
    return table


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None) -> str:
    """A table as plain text, wide enough not to cut paths: for logs, files and pipes."""
    out = Console(file=io.StringIO(), width=250, no_color=True, highlight=False, record=True)
    out.print(make_table(headers, rows, title))
    return "\n".join(line.rstrip() for line in out.export_text().splitlines())


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None) -> None:
    """A table on stdout: rich on a terminal, plain text elsewhere."""
    if sys.stdout.isatty():
        Console().print(make_table(headers, rows, title))
    else:
        print(format_table(headers, rows, title), flush=True)


# What happened to a package, in every subcommand's words: build (ok), upload, verify, and ssm-conda-dev's gpu-test and stand-in.
Result = Literal["pending", "ok", "skipped", "failed", "invalid", "exists", "uploaded", "not served", "not attempted",
                 "identical", "differs", "passed", "built", "rebuilt", "reused"]


@dataclass
class Outcome:
    """What happened to one package: a row of every subcommand's summary table."""

    package: str
    variant: str = "-"
    result: Result = "pending"
    seconds: float | None = None
    size: int | None = None
    path: Path | None = None
    detail: str = ""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "result" and value not in get_args(Result):  # a misspelt state fails where it is set
            raise ValueError(f"unknown result {value!r}; accepted: {', '.join(get_args(Result))}")
        super().__setattr__(name, value)

    @property
    def failed(self) -> bool:
        return self.result == "failed"

    def row(self) -> list[str]:
        duration = human_duration(self.seconds) if self.seconds is not None else "-"
        size = human_size(self.size) if self.size is not None else "-"
        return [self.package, self.variant, self.result, duration, size,
                os.path.relpath(self.path) if self.path else "-", self.detail]


SUMMARY_HEADERS = ("package", "variant", "result", "time", "size", "path", "detail")


def print_summary(outcomes: Sequence[Outcome], title: str | None = None) -> None:
    """The summary table that ends every long subcommand; columns without content are left out."""
    rows = [o.row() for o in outcomes]
    keep = [i for i, h in enumerate(SUMMARY_HEADERS) if h in ("package", "result") or any(r[i] not in ("-", "") for r in rows)]
    print_table([SUMMARY_HEADERS[i] for i in keep], [[r[i] for i in keep] for r in rows], title)


def user_path(value: str | Path, what: str) -> Path:
    """`value`, ~ expanded; a UsageError where ~USER names no user, or where the system would refuse the path as too long."""
    if (text := os.path.expanduser(value)).startswith("~"):  # os.path's expanduser leaves an unknown ~USER as it is
        raise UsageError(f"{what} {text}: no user {text[1:].partition('/')[0]!r} here; accepted: a path, ~/... or ~USER/...")
    if len(os.fsencode(text)) >= 4096 or any(len(os.fsencode(name)) > 255 for name in text.split("/")):
        raise UsageError(f"{what} {text[:60]}... is too long ({len(text)} characters; the limit is 4096, 255 per name)")
    return Path(text)


def one_of(kind: str, value: str, accepted: Sequence[str]) -> UsageError:
    """The standard error for a value outside a known set."""
    return UsageError(f"unknown {kind} {value!r}; accepted: {', '.join(accepted)}")
