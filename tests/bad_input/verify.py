"""ssm-conda verify: bad files, packages it must not rebuild (tests/scripts/test_verify.py has crafted rendered recipes),
and build roots it must not use."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.bad_input import Case, Context
from tests.bad_input.gpu_check import bare_file
from tests.damaged_archives import foreign_package, good_package, truncated
from tests.reproducible_build import build_tiny, empty_channel, with_member


def windows(index: bytes) -> bytes:
    """index.json of a win-64 package (verify reads what it is from there)."""
    return index.replace(b'"subdir": "linux-64"', b'"subdir": "win-64"').replace(b'"platform": "linux"', b'"platform": "win"')


VERIFY = ("verify", "{pkg}", "--no-cache", "-c", "{tmp}/empty-channel")  # as the tiny checkout's packages are built


def built(change: Callable[[Context], object] | None = None) -> Callable[[Context], None]:
    """A package of the tiny checkout `checkout` (the workspace), built in the build root `root`, which
    SSM_CONDA_BUILD_ROOT names; then `change`."""

    def setup(context: Context) -> None:
        context.values["pkg"] = str(build_tiny(context.tmp / "root", context.tmp / "channel"))
        context.env |= {"SSM_CONDA_BUILD_ROOT": str(context.tmp / "root"), "SSM_CONDA_WORKSPACE": str(context.tmp / "checkout")}
        if change:
            change(context)
    return setup


def built_in_a_folder_now_read_only(context: Context) -> None:
    """Built with the build root under `builds/`, which the verifying account cannot write."""
    (context.tmp / "builds").mkdir()
    context.values["pkg"] = str(build_tiny(context.tmp / "builds" / "root", context.tmp / "channel"))
    context.env |= {"SSM_CONDA_BUILD_ROOT": str(context.tmp / "builds" / "root"),
                    "SSM_CONDA_WORKSPACE": str(context.tmp / "builds" / "checkout")}
    context.read_only(context.tmp / "builds")


def in_another_root(context: Context) -> None:
    """The verifying user's build root is another folder: verify would empty the one the package names."""
    (context.tmp / "mine").mkdir(mode=0o700)
    context.env["SSM_CONDA_BUILD_ROOT"] = str(context.tmp / "mine")


def cache_read_only(context: Context) -> None:
    (context.tmp / "ccache").mkdir()
    context.env["SSM_CONDA_CCACHE_DIR"] = str(context.read_only(context.tmp / "ccache"))


def lock_links_to_a_victim(context: Context) -> None:
    (context.tmp / "victim.txt").write_text("31 bytes of somebody's content.")
    (context.tmp / "root" / ".lock").unlink()
    (context.tmp / "root" / ".lock").symlink_to(context.tmp / "victim.txt")


CASES = [
    Case("verify-missing-file", ("verify", "{tmp}/causal-conv1d-1.7.0-x_0.conda"), "no such file or directory"),
    Case("verify-not-a-conda-package", ("verify", "{tmp}/causal_conv1d-1.7.0-cp312-cp312-linux_x86_64.whl"),
         "not a conda package", setup=bare_file("causal_conv1d-1.7.0-cp312-cp312-linux_x86_64.whl")),
    Case("verify-tar-bz2", ("verify", "{tmp}/causal-conv1d-1.7.0-x_0.tar.bz2"),
         "causal-conv1d-1.7.0-x_0.tar.bz2: verify rebuilds .conda packages (what ssm-conda build writes), not .tar.bz2",
         setup=bare_file("causal-conv1d-1.7.0-x_0.tar.bz2")),
    Case("verify-folder-without-packages", ("verify", "{tmp}"), "no .conda package in"),
    Case("verify-empty-archive", ("verify", "{tmp}/causal-conv1d-1.7.0-x_0.conda"), "causal-conv1d-1.7.0-x_0.conda: empty file",
         setup=bare_file("causal-conv1d-1.7.0-x_0.conda")),
    Case("verify-truncated-archive", VERIFY, "not a valid conda archive",
         setup=built(lambda c: c.values.update(pkg=str(truncated(build_tiny(c.tmp / "root", c.tmp / "channel")))))),
    Case("verify-foreign-package", ("verify", "{pkg}"), "numpy is not a package of this project",
         setup=lambda c: c.values.update(pkg=str(foreign_package(good_package(c.tmp / "channel"))))),
    Case("verify-no-recipe-inside", ("verify", "{pkg}"), "records no rendered recipe",
         setup=lambda c: c.values.update(pkg=str(good_package(c.tmp / "channel")))),
    Case("verify-another-recipe", VERIFY, "its recipe is not this checkout's (build.sh differ); check out the revision",
         setup=built(lambda c: (c.tmp / "checkout/recipe/causal-conv1d/build.sh").write_text("echo another\n"))),
    Case("verify-variant-no-longer-listed", VERIFY, "_hdfc6263_0 is not a variant this checkout renders for linux-64",
         setup=built(lambda c: (c.tmp / "checkout/variants/tiny.yaml").write_text(
             (c.tmp / "checkout/variants/tiny.yaml").read_text().replace("3.10", "3.11")))),
    Case("verify-channel-not-named", ("verify", "{pkg}", "-c", "{tmp}/other-channel"),
         "empty-channel, not from a channel named with -c", setup=built(lambda c: empty_channel(c.tmp / "other-channel"))),
    Case("verify-build-root-read-only", (*VERIFY[:3], "-c", "{tmp}/builds/empty-channel"), "builds/root: ",
         setup=built_in_a_folder_now_read_only),
    Case("verify-a-windows-package-here", VERIFY, "a win-64 package is rebuilt on Windows, where its compilers run",
         setup=built(lambda c: c.values.update(pkg=str(with_member(Path(c.values["pkg"]), "info/index.json",
                                                                      windows, c.tmp / "win"))))),
    Case("verify-built-in-another-root", VERIFY, "root/bld/rattler-build_causal-conv1d, not in", setup=built(in_another_root),
         may_write=("mine/.lock",)),  # the user's build root, held while the package is read in it
    Case("verify-build-root-open-to-all", VERIFY, "other users may write in it (mode 777); set SSM_CONDA_BUILD_ROOT",
         setup=built(lambda c: (c.tmp / "root").chmod(0o777))),
    Case("verify-build-root-lock-is-a-link", VERIFY, "cannot build there (Too many levels of symbolic links)",
         setup=built(lock_links_to_a_victim)),
    Case("verify-compiler-cache-read-only", ("verify", "{pkg}"), "is not writable", setup=built(cache_read_only)),
    Case("verify-unknown-option", ("verify", "{pkg}", "--output-dir", "{tmp}"), "unrecognized arguments: --output-dir",
         setup=built()),
]
