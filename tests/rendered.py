"""The whole matrix as rattler-build renders it, once per test session (plan() renders every
recipe for every variant file), and the parts of it a test asks for."""

from __future__ import annotations

from functools import cache

from ssm_conda.matrix import TARGET_PLATFORM, PlannedVariant, plan


@cache
def whole_matrix(target_platform: str = TARGET_PLATFORM) -> tuple[PlannedVariant, ...]:
    return tuple(plan(target_platform=target_platform))


def variants(**wanted: str) -> list[PlannedVariant]:
    """The rendered variants whose attributes (package, cuda, python, torch, generation) are as given."""
    return [v for v in whole_matrix() if all(getattr(v, key) == value for key, value in wanted.items())]
