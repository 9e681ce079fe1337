"""ssm-conda verify."""

from __future__ import annotations

from tests.bad_input import Case, Context
from tests.bad_input.gpu_check import bare_file
from tests.damaged_archives import foreign_package, good_package, truncated
from tests.reproducible_build import build_tiny


def built(context: Context) -> None:
    """A package built in the build root `root`, which SSM_CONDA_BUILD_ROOT names."""
    context.values["pkg"] = str(build_tiny(context.tmp / "root", context.tmp / "channel"))
    context.env["SSM_CONDA_BUILD_ROOT"] = str(context.tmp / "root")


def built_in_a_folder_now_read_only(context: Context) -> None:
    """Built with the build root under `builds/`, which the verifying account cannot write."""
    (context.tmp / "builds").mkdir()
    context.values["pkg"] = str(build_tiny(context.tmp / "builds" / "root", context.tmp / "channel"))
    context.env["SSM_CONDA_BUILD_ROOT"] = str(context.tmp / "builds" / "root")
    context.read_only(context.tmp / "builds")


def built_in_another_root(context: Context) -> None:
    """A package that names its own build folder: verify would empty it (a hostile package: the user's files)."""
    built(context)
    (context.tmp / "mine" / "bld").mkdir(parents=True)
    (context.tmp / "mine" / "bld" / "keep.txt").write_text("the user's")
    context.env["SSM_CONDA_BUILD_ROOT"] = str(context.tmp / "mine")


def cache_read_only(context: Context) -> None:
    built(context)
    (context.tmp / "ccache").mkdir()
    context.env["SSM_CONDA_CCACHE_DIR"] = str(context.read_only(context.tmp / "ccache"))


CASES = [
    Case("verify-missing-file", ("verify", "{tmp}/causal-conv1d-1.7.0-x_0.conda"), "no such file or directory"),
    Case("verify-not-a-conda-package", ("verify", "{tmp}/causal_conv1d-1.7.0-cp312-cp312-linux_x86_64.whl"),
         "not a conda package", setup=bare_file("causal_conv1d-1.7.0-cp312-cp312-linux_x86_64.whl")),
    Case("verify-folder-without-packages", ("verify", "{tmp}"), "no .conda package in"),
    Case("verify-empty-archive", ("verify", "{tmp}/causal-conv1d-1.7.0-x_0.conda"), "causal-conv1d-1.7.0-x_0.conda: empty file",
         setup=bare_file("causal-conv1d-1.7.0-x_0.conda")),
    Case("verify-truncated-archive", ("verify", "{pkg}"), "not a valid conda archive",
         setup=lambda c: c.values.update(pkg=str(truncated(build_tiny(c.tmp / "root", c.tmp / "channel"))))),
    Case("verify-foreign-package", ("verify", "{pkg}"), "numpy is not a package of this project",
         setup=lambda c: c.values.update(pkg=str(foreign_package(good_package(c.tmp / "channel"))))),
    Case("verify-no-recipe-inside", ("verify", "{pkg}"), "records no rendered recipe",
         setup=lambda c: c.values.update(pkg=str(good_package(c.tmp / "channel")))),
    Case("verify-build-root-read-only", ("verify", "{pkg}", "--no-cache"), "builds/root: ",
         setup=built_in_a_folder_now_read_only),
    Case("verify-built-in-another-root", ("verify", "{pkg}", "--no-cache"), "root/bld/rattler-build_causal-conv1d, not in",
         setup=built_in_another_root),
    Case("verify-compiler-cache-read-only", ("verify", "{pkg}"), "is not writable", setup=cache_read_only),
    Case("verify-unknown-option", ("verify", "{pkg}", "--output-dir", "{tmp}"), "unrecognized arguments: --output-dir",
         setup=built),
]
