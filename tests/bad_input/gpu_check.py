"""ssm-conda-dev gpu-test; `tiny_package` makes the real archives its cases (and tests/scripts) need."""

from __future__ import annotations

import random
import zipfile
from dataclasses import replace
from pathlib import Path

from tests.bad_input import Case, Context
from tests.damaged_archives import garbage_pkg_member, no_pkg_member, truncated

BUILD = "cuda130_py312_torch213_all_h0_0"
PASSED = 'echo "============ 1 passed in 0.01s ============"'


def tiny_package(out: Path, name: str = "causal-conv1d", commands: tuple[str, ...] = (PASSED,)) -> Path:
    """A real package named like ours (noarch, in out/noarch/, built by rattler-build from no channel but
    `out`), whose test section runs `commands` as one script test (no test section without commands)."""
    from rattler_build import Stage0Recipe, ToolConfiguration, VariantConfig

    (out / "noarch").mkdir(parents=True, exist_ok=True)
    tests = "tests:\n  - script:\n" + "".join(f"      - {command!r}\n" for command in commands) if commands else ""
    recipe = f"""
package: {{name: {name}, version: "1.7.0"}}
build:
  number: 0
  noarch: generic
  string: {BUILD}
  script: [mkdir -p $PREFIX/share/fake && echo {name} > $PREFIX/share/fake/{name}.txt]
{tests}"""
    stage0 = Stage0Recipe.from_yaml(recipe, recipe_dir=out.parent / f"recipe-{name}")
    (result,) = stage0.run_build(VariantConfig(), ToolConfiguration(test_strategy="skip"), output_dir=out,
                                 channels=[out.as_uri()], no_build_id=True)
    return Path(result.packages[0])


def one_package(context: Context, commands: tuple[str, ...] = (PASSED,)) -> None:
    context.values["pkg"] = str(tiny_package(context.tmp / "channel", commands=commands))


def damaged_second(context: Context) -> None:
    """A good causal-conv1d whose test would leave a file, and a damaged mamba-ssm after it."""
    tiny_package(context.tmp / "channel", commands=(f"touch {context.tmp}/causal-conv1d-tested", PASSED))
    garbage_pkg_member(tiny_package(context.tmp / "channel", "mamba-ssm"))


def log_dir_is_a_file(context: Context) -> None:
    one_package(context, (f"touch {context.tmp}/tested", PASSED))
    (context.tmp / "logs").write_text("")


def log_dir_read_only(context: Context) -> None:
    one_package(context, (f"touch {context.tmp}/tested", PASSED))
    context.read_only(context.tmp / "channel")


def zip_of_junk(context: Context) -> None:
    with zipfile.ZipFile(context.tmp / "causal-conv1d-1.7.0-x_0.conda", "w") as archive:
        archive.writestr("junk.txt", "junk")


def bare_file(name: str, content: bytes = b""):  # noqa: ANN201
    def setup(context: Context) -> None:
        (context.tmp / name).write_bytes(content)

    return setup


NO_GPU = "--allow-no-gpu"
CASES = [replace(case, dev=True) for case in [  # ssm-conda-dev gpu-test
    Case("gpu-test-missing-file", ("gpu-test", "{tmp}/causal-conv1d-1.7.0-x_0.conda"), "no such file or directory"),
    Case("gpu-test-not-a-conda-package", ("gpu-test", "{tmp}/causal_conv1d-1.7.0-cp312-cp312-linux_x86_64.whl"),
         "not a conda package", setup=bare_file("causal_conv1d-1.7.0-cp312-cp312-linux_x86_64.whl")),
    Case("gpu-test-folder-without-packages", ("gpu-test", "{tmp}"), "no causal-conv1d or mamba-ssm package in"),
    Case("gpu-test-missing-channel-folder", ("gpu-test", "{pkg}", "-c", "{tmp}/nowhere", NO_GPU),
         "no such channel directory", setup=one_package),
    Case("gpu-test-bad-channel-scheme", ("gpu-test", "{pkg}", "-c", "ftp://example.org/x", NO_GPU),
         "channel 'ftp://example.org/x' is not a channel name", setup=one_package),
    Case("gpu-test-unknown-cuda", ("gpu-test", "{pkg}", "--cuda", "11.8", NO_GPU), "unknown CUDA version '11.8'",
         setup=one_package),
    Case("gpu-test-unknown-package", ("gpu-test", "{pkg}", "--package", "numpy"), "invalid choice: 'numpy'",
         setup=one_package),
    Case("gpu-test-unknown-option", ("gpu-test", "{pkg}", "--gpu", "0"), "unrecognized arguments: --gpu 0",
         setup=one_package),
    Case("gpu-test-random-bytes", ("gpu-test", "{tmp}/causal-conv1d-1.7.0-x_0.conda", NO_GPU), "cannot read package",
         setup=bare_file("causal-conv1d-1.7.0-x_0.conda", random.Random(1).randbytes(4096))),
    Case("gpu-test-empty-archive", ("gpu-test", "{tmp}/causal-conv1d-1.7.0-x_0.conda", NO_GPU), "cannot read package",
         setup=bare_file("causal-conv1d-1.7.0-x_0.conda")),
    Case("gpu-test-zip-of-junk", ("gpu-test", "{tmp}/causal-conv1d-1.7.0-x_0.conda", NO_GPU), "not a valid conda archive",
         setup=zip_of_junk),
    Case("gpu-test-truncated-archive", ("gpu-test", "{pkg}", NO_GPU), "cannot read package",
         setup=lambda c: c.values.update(pkg=str(truncated(tiny_package(c.tmp / "channel"))))),
    Case("gpu-test-no-pkg-member", ("gpu-test", "{pkg}", NO_GPU), "is missing from the payload",
         setup=lambda c: c.values.update(pkg=str(no_pkg_member(tiny_package(c.tmp / "channel"))))),
    # the good package sorts first: before, its tests ran, then the damaged one stopped the run
    Case("gpu-test-damaged-after-a-good-one", ("gpu-test", "{tmp}/channel", NO_GPU), "cannot read package",
         setup=damaged_second),
    Case("gpu-test-log-dir-is-a-file", ("gpu-test", "{pkg}", "--log-dir", "{tmp}/logs", NO_GPU),
         "logs is not a directory", setup=log_dir_is_a_file),
    Case("gpu-test-log-dir-under-a-file", ("gpu-test", "{pkg}", "--log-dir", "{tmp}/logs/run1", NO_GPU),
         "is not a directory", setup=log_dir_is_a_file),
    Case("gpu-test-log-dir-read-only", ("gpu-test", "{pkg}", "--log-dir", "{tmp}/channel", NO_GPU),
         "is not writable", setup=log_dir_read_only),
    Case("gpu-test-log-dir-in-a-read-only-folder", ("gpu-test", "{pkg}", "--log-dir", "{tmp}/channel/logs", NO_GPU),
         "is not writable", setup=log_dir_read_only),
]]
