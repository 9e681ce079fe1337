"""Comparing a kernel's tensors with its reference's, for both packages' tests: one line that says
how many values are off and by how much, instead of torch's whole-tensor dump."""

from __future__ import annotations


def assert_close(actual, expected, rtol: float, atol: float, what: str) -> None:  # noqa: ANN001 (torch tensors)
    import torch  # not at import time: collecting the tests needs no torch

    expected = expected.to(actual.dtype)
    if torch.allclose(actual, expected, rtol=rtol, atol=atol):
        return
    diff = (actual.float() - expected.float()).abs()
    bad = (~torch.isclose(actual, expected, rtol=rtol, atol=atol)).sum().item()
    raise AssertionError(
        f"{what}: {bad} of {actual.numel()} values off (max abs diff {diff.max().item():.4g}, "
        f"mean {diff.mean().item():.4g}; rtol {rtol}, atol {atol})"
    )
