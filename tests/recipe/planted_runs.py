"""One pytest run of a package's kernel tests over planted stand-in bugs, read back per bug.

Both packages' dry runs (tests/recipe/*/test_kernels_dry_run.py) use it: their cpu_kernel/
planted_bugs.py plugin parametrizes every kernel test over the bugs named in `env` (ids
`bug=<name>`), and the JUnit report says how each case ended.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from pathlib import Path

# "test_fwd_bwd[bug=silu_grad-float32-2-...]": planted_bugs.py's parameter comes first.
BUG_ID = re.compile(r"^(\w+)\[bug=(\w+)(?:-(.+))?\]$")


def outcomes_by_bug(kernel_tests: Path, tmp: Path, env: dict[str, str], pythonpath: Sequence[Path],
                    clear: tuple[str, ...], timeout: int) -> dict[str, dict[str, str]]:
    """{bug ("none": the correct stand-ins): {case id: passed|failed|error|"skipped: <reason>"}}.

    `clear` names the prefixes of the caller's variables that must not reach the run."""
    report = tmp / "report.xml"
    environ = {k: v for k, v in os.environ.items() if not k.startswith(clear)}
    environ.update(env, PYTHONPATH=os.pathsep.join(str(p) for p in pythonpath), PYTHONDONTWRITEBYTECODE="1")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "planted_bugs", "-q", "-rs",
         "-W", "ignore::UserWarning", "--rootdir", str(kernel_tests.parent), "-c", os.devnull,
         f"--junitxml={report}", str(kernel_tests)],
        capture_output=True, text=True, timeout=timeout, cwd=tmp, env=environ,
    )
    assert report.is_file(), result.stdout + result.stderr
    return read_outcomes(report)


def read_outcomes(report: Path, keep: Callable[[ET.Element], bool] = lambda case: True) -> dict[str, dict[str, str]]:
    """{bug: {case id: passed|failed|error|"skipped: <reason>"}} of a JUnit report's planted-bug cases (those `keep`
    takes; every one must carry a bug id)."""
    by_bug: dict[str, dict[str, str]] = {}
    for case in filter(keep, ET.parse(report).iter("testcase")):
        kinds = {child.tag: child.get("message", "") for child in case}
        outcome = next((k for k in ("failure", "error", "skipped") if k in kinds), "passed")
        match = BUG_ID.match(case.get("name"))
        assert match, case.get("name")
        function, bug, params = match.groups(default="")
        text = {"failure": "failed", "skipped": f"skipped: {kinds.get('skipped')}"}.get(outcome, outcome)
        by_bug.setdefault(bug, {})[f"{function}[{params}]"] = text
    return by_bug
