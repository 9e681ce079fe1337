"""The installed extension carries the GPU code the variant asked for, and this GPU can run it.

Shared by the packages' tests: each package's tests/test_arch.py imports these, and its conftest.py
provides `extension_module` (causal_conv1d._C, mamba_ssm._C), `expected_archs_env` (the
variable the recipe sets to the variant's cuda_arch_list) and `kernel_ops` (the module that loads the
library, the ops' namespace and names).
"""

from __future__ import annotations

import importlib
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


@pytest.mark.cpu
def test_library_uses_no_python(extension):
    """The kernels are torch ops in a library that uses no Python (patch "register ops with torch library"):
    it needs no libpython or libtorch_python and leaves no Python symbol undefined."""
    path, _ = extension
    if path.suffix == ".pyd":
        pytest.skip(f"{path.name}: only ELF libraries (Linux) are read")
    found = check_arch.python_references(path.read_bytes())
    assert not found, f"{path.name} uses Python: {', '.join(found[:5])}"


@pytest.mark.cpu
def test_kernels_are_torch_ops(kernel_ops):
    """Importing the old extension's name loads the library, which registers each kernel for CUDA tensors (and
    none for CPU ones), under the names the extension had."""
    import torch

    module_name, namespace, names = kernel_ops
    module = importlib.import_module(module_name)
    for name in names:
        qualified = f"{namespace}::{name}"
        assert getattr(module, name) is getattr(getattr(torch.ops, namespace), name), qualified
        assert torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "CUDA"), f"{qualified}: no CUDA kernel"
        assert not torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "CPU"), f"{qualified}: a CPU kernel"
