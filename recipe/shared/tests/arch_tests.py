"""The installed extension carries the GPU code the variant asked for, and this GPU can run it.

Shared by the packages' tests: each package's tests/test_arch.py imports these, and its conftest.py
provides `extension_module` (causal_conv1d_cuda, selective_scan_cuda) and `expected_archs_env` (the
variable the recipe sets to the variant's cuda_arch_list).
"""

from __future__ import annotations

import os

import check_arch
import pytest


@pytest.fixture(scope="module")
def extension(extension_module):
    path = check_arch.find_extension(extension_module)
    return path, check_arch.read_fatbins(path)


@pytest.mark.cpu
def test_extension_has_gpu_code(extension):
    path, fatbins = extension
    images = check_arch.all_images(fatbins)
    print(f"{path.name}: {len(fatbins)} fat binaries, built for {check_arch.describe(images)}")
    assert fatbins, f"{path} has no .nv_fatbin: no GPU code at all"
    assert any(i.kind == "sass" for i in images), f"{path} has no SASS"


@pytest.mark.cpu
def test_extension_matches_variant_arch_list(extension, expected_archs_env):
    """Exactly TORCH_CUDA_ARCH_LIST of the variant (the recipe passes it): catches an ignored list."""
    expected = os.environ.get(expected_archs_env, "").strip()
    if not expected:
        pytest.skip(f"{expected_archs_env} is not set (the recipe's test sets it)")
    path, fatbins = extension
    problems = check_arch.compare_expected(fatbins, expected)
    assert not problems, (
        f"{path.name} is built for {check_arch.describe(check_arch.all_images(fatbins))}, "
        f"the variant asked for {expected}: " + "; ".join(problems)
    )


@pytest.mark.cpu
def test_extension_has_line_tables_only_on_request(extension):
    """nvcc's source-line tables (for profilers) only in a build that asked for them: the recipe
    sets SSM_CONDA_EXPECTED_LINEINFO to the variant's nvcc_lineinfo, 0 or 1."""
    expected = os.environ.get("SSM_CONDA_EXPECTED_LINEINFO", "").strip()
    if expected not in ("0", "1"):
        pytest.skip("SSM_CONDA_EXPECTED_LINEINFO is not 0 or 1 (the recipe's test sets it)")
    path, fatbins = extension
    images = check_arch.all_images(fatbins)
    with_tables = sorted({i.name for i in images if i.line_info})
    if expected == "1":
        assert len(with_tables) == len({i.name for i in images}), f"{path.name}: line tables only in {with_tables}"
    else:
        assert not with_tables, f"{path.name} carries source-line tables ({', '.join(with_tables)}): built with -lineinfo"


def test_extension_runs_on_this_gpu(extension):
    import torch

    path, fatbins = extension
    for index in range(torch.cuda.device_count()):
        gpu = torch.cuda.get_device_capability(index)
        verdict = check_arch.check(fatbins, gpu, what=path.name)
        print(verdict.message)
        assert verdict.ok, verdict.message
