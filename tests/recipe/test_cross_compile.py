"""Both recipes cross-compile linux-aarch64 from linux-64 the way conda-forge's feedstocks do
(causal-conv1d-feedstock: build_platform linux_aarch64: linux_64): rendered for that pair, the build
environment gains crossenv with the build machine's python and pytorch; rendered natively, nothing."""

from __future__ import annotations

import platform

import pytest
from ssm_conda.matrix import plan
from ssm_conda.project import NAMES
from ssm_conda.selection import Selection

CROSS = ["cross-python_linux-aarch64", "python", "pytorch 2.13.* cuda*"]


@pytest.mark.skipif(platform.machine() != "x86_64", reason="renders a cross build from linux-64: run on x86_64")
@pytest.mark.parametrize("package", NAMES)
def test_cross_build_requirements(package):
    selection = Selection(cuda="13.0", python="3.12", torch="2.13", generations=("sm90",), packages=(package,))
    # rendered on linux-64 as `ssm-conda build --target-platform linux-aarch64` renders it
    (cross,) = plan(selection, target_platform="linux-aarch64", overrides={"host_platform": ["linux-aarch64"]})
    (native,) = plan(selection, target_platform="linux-64")
    assert cross.rendered.recipe.requirements.build[-3:] == CROSS
    assert not set(CROSS) & set(native.rendered.recipe.requirements.build)
    assert cross.archs == "9.0+PTX" and cross.rendered.variant["target_platform"] == "linux-aarch64"
    # the host environment is solved for the variant's host_platform (py-rattler-build reads no other)
    assert cross.rendered.variant["host_platform"] == "linux-aarch64" and "host_platform" not in native.rendered.variant
    assert "cuda-cudart_linux-aarch64" in cross.rendered.recipe.requirements.run
