"""Reading a test run's output: pytest's summary line, and whether the GPU tests really ran."""

from __future__ import annotations

import re
from collections.abc import Sequence

# Printed by recipe/causal-conv1d/tests/conftest.py at the end of a pytest run whose GPU tests did not run.
SKIP_MARKER = "causal-conv1d GPU tests skipped:"
REQUIRED_MARKER = "causal-conv1d GPU required but unusable:"
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
    skipped = next((ln.strip() for ln in lines if SKIP_MARKER in ln or REQUIRED_MARKER in ln), "")
    if not success:
        return False, summary or "failed (see the log)"
    if require_gpu and skipped:
        return False, skipped
    return True, summary or "passed"
