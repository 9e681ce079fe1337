"""The fault-injection table: every subcommand with each bad input it takes (tests/test_bad_input.py runs it).

One module per subcommand (or group of dev tools) holds its CASES. A case prepares a temporary folder,
runs the command in-process, and the runner asserts: the exit status, exactly one line on stderr
("error: ..." naming the bad value), no traceback, and nothing written or changed in the folder
outside what the case says may change (`may_write`).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Context:
    """What a case's setup gets: the case's temporary folder (also the working directory, $HOME and
    $SSM_CONDA_CACHE's parent), the environment to change, and cleanups to run after the case."""

    tmp: Path
    env: dict[str, str]
    cleanups: list[Callable[[], None]] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)  # placeholders of argv: {tmp}, and what setup adds

    def read_only(self, path: Path) -> Path:
        """Make `path` (a folder) read-only for this process, root included; undone after the case."""
        stack = contextlib.ExitStack()
        stack.enter_context(read_only(path))
        self.cleanups.append(stack.close)
        return path


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]  # str.format()-ed with Context.values
    message: str  # a part of the one error line
    status: int = 2
    setup: Callable[[Context], None] | None = None
    dev: bool = False  # ssm-conda-dev instead of ssm-conda
    may_write: tuple[str, ...] = ()  # glob patterns, relative to tmp, of paths the command may create or change


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Root ignores permission bits: a read-only bind mount where we are root, else chmod 0555."""
    if os.geteuid() == 0:
        subprocess.run(["mount", "--bind", "-o", "ro", str(path), str(path)], check=True, capture_output=True)
        try:
            yield
        finally:
            subprocess.run(["umount", str(path)], check=True, capture_output=True)
    else:
        mode = path.stat().st_mode
        path.chmod(0o555)
        try:
            yield
        finally:
            path.chmod(mode)
