"""ssm-conda-dev gpu-bundle: a variant the matrix has no packages of, packages that are damaged or carry no test
section, a --bundle that cannot be written. No bundle, no partial file."""

from __future__ import annotations

from tests.bad_input import Case, Context
from tests.damaged_archives import good_package, truncated

DEFAULT = ("13.0", "3.10", "2.11", "sm90")  # the command's default variant


def plain_packages(context: Context) -> None:
    """Both packages of the default variant, with no test section (rattler-build's assembler writes none)."""
    for package in ("causal-conv1d", "mamba-ssm"):
        good_package(context.tmp / "output", *DEFAULT, package)


def damaged_first(context: Context) -> None:
    plain_packages(context)
    truncated(next((context.tmp / "output" / "linux-64").glob("causal-conv1d-*.conda")))


BUNDLE = ("gpu-bundle", "--output-dir", "{tmp}/output")
CASES = [
    Case("gpu-bundle-no-packages", BUNDLE, "no causal-conv1d package of cuda13.0-py3.10-torch2.11-sm90 in", dev=True),
    Case("gpu-bundle-torch-not-x-y", (*BUNDLE, "--torch", "2.x"), "unknown pytorch version '2.x'", dev=True),
    Case("gpu-bundle-unknown-generation", (*BUNDLE, "--generation", "sm99"),
         "unknown GPU generation of variants/cuda130.yaml 'sm99'", dev=True),
    Case("gpu-bundle-no-test-section", BUNDLE, "records no test section (info/tests/tests.yaml)", setup=plain_packages,
         dev=True),
    Case("gpu-bundle-damaged-package", BUNDLE, "not a valid conda archive", setup=damaged_first, dev=True),
    Case("gpu-bundle-into-a-missing-folder", (*BUNDLE, "--bundle", "{tmp}/none/check.pyz"),
         "none/check.pyz: name a file in an existing folder", dev=True),
    Case("gpu-bundle-two-generations", (*BUNDLE, "--generation", "sm90", "--generation", "all"),
         "--generation sm90 all: name one", dev=True),
    Case("gpu-bundle-into-a-folder", (*BUNDLE, "--bundle", "{tmp}"), "name a file in an existing folder", dev=True),
]
