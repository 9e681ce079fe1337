"""Reading a test run's output: pytest's summary line, and whether the GPU tests really ran."""

from __future__ import annotations

import re
from collections.abc import Sequence

# What every package's test section prints (recipe/shared/tests/gpu_gate.py, Gate.skip_marker and
# Gate.required_marker) at the end of a pytest run whose GPU tests did not run: "<package> GPU tests
# skipped: <why>", or "<package> GPU required but unusable: <why>".
GPU_TESTS_NOT_RUN = re.compile(r"\S+ GPU (?:tests skipped|required but unusable):")
PYTEST_SUMMARY = re.compile(r"^=+ (.*\b(?:passed|failed|skipped|errors?|deselected)\b.*) in [\d.]+s(?: \(.*\))? =+$")


def summarize_output(lines: Sequence[str]) -> str:
    """The pytest summary line(s) of a test's output, or ''."""
    summaries = []
    for line in lines:
        match = PYTEST_SUMMARY.match(line.strip())
        if match:
            summaries.append(match.group(1))
    return "; ".join(summaries)


def judge(success: bool, lines: Sequence[str], require_gpu: bool) -> tuple[bool, str]:
    """Pass/fail of one test from rattler-build's verdict and, when a GPU is required, its output."""
    summary = summarize_output(lines)
    skipped = next((ln.strip() for ln in lines if GPU_TESTS_NOT_RUN.search(ln)), "")
    if not success:
        return False, summary or "failed (see the log)"
    if require_gpu and skipped:
        return False, skipped
    return True, summary or "passed"
