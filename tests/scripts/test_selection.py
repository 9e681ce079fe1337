"""ssm_conda.selection: one set of selector flags for plan, build, upload and gpu-test, and which built
packages a selection chooses, by the names rattler-build renders for it."""

from __future__ import annotations

import argparse

import pytest
from ssm_conda import cli
from ssm_conda.channels import name_and_build_of
from ssm_conda.console import UsageError
from ssm_conda.matrix import Selection, plan
from ssm_conda.selection import choose_built, without_hash

from tests.rendered import variants

SELECTORS = {"--package", "--cuda", "--python", "--torch", "--generation", "--arch"}


def file_names(*selections: Selection) -> list[str]:
    """Package file names exactly as the recipes name them (the hash is rattler-build's)."""
    return sorted(f"{v.package}-1.0-{v.build_string}.conda" for s in selections for v in plan(s))


def options(argv: list[str]) -> set[str]:
    parser = cli.build_parser(argv)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[argv[0]]
    if argv[0] == "upload":  # the flags stand before and after the target, once each
        sub = next(a for a in sub._actions if isinstance(a, argparse._SubParsersAction)).choices["prefix"]
    return {flag for action in sub._actions for flag in action.option_strings}


@pytest.mark.parametrize("command", ["plan", "build", "upload", "gpu-test"])
def test_every_command_that_selects_takes_the_same_selectors(command):
    assert SELECTORS <= options([command])


def test_without_hash():
    assert without_hash("cuda130_py312_torch213_sm90_h1a2b3c4_0") == "cuda130_py312_torch213_sm90"


def test_a_selection_chooses_what_rattler_build_renders_for_it():
    names = file_names(Selection(cuda="13.0", python="3.12", torch="2.13", generations=("all", "sm90")),
                       Selection(cuda="12.9", python="3.11", torch="2.12"))

    def chosen(**kw) -> list[str]:
        return sorted(choose_built(names, lambda n: name_and_build_of(n), Selection(**kw)))

    assert chosen() == names
    assert choose_built(["other-1.0-h0_0.conda"], name_and_build_of, Selection()) == ["other-1.0-h0_0.conda"]
    assert choose_built(["other-1.0-h0_0.conda"], name_and_build_of, Selection(packages=("mamba-ssm",))) == []
    assert chosen(cuda="13.0", generations=("sm90",)) == [n for n in names if "_sm90_" in n]
    assert chosen(cuda="12.9") == [n for n in names if "cuda129" in n]
    assert chosen(packages=("mamba-ssm",)) == [n for n in names if n.startswith("mamba-ssm-")]
    assert chosen(cuda="13.0", python="3.12", torch="2.13", generations=("all",), packages=("causal-conv1d",)) == \
        [n for n in names if n.startswith("causal-conv1d-") and "cuda130" in n and "_all_" in n]
    assert chosen(python="3.10") == []
    # another hash (a build against a stand-in channel's compilers): the same variant
    other_hash = [n.replace("_h", "_hffff", 1) for n in names]
    assert len(choose_built(other_hash, name_and_build_of, Selection(cuda="12.9"))) == 2


def test_an_unknown_value_is_one_line_naming_what_is_accepted():
    with pytest.raises(UsageError, match=r"unknown CUDA version '11.8'"):
        choose_built(["x"], name_and_build_of, Selection(cuda="11.8"))


def test_the_build_glob_is_what_rattler_build_renders_less_the_hash():
    """doctor's install commands pin a variant by this glob: every rendered build of the variant
    matches it, no other variant's does."""
    import fnmatch

    from ssm_conda.matrix import load_variant_files
    from ssm_conda.selection import build_glob

    cuda130 = next(f for f in load_variant_files() if f.cuda == "13.0")
    every = [v.build_string for v in variants(cuda="13.0", package="causal-conv1d")]
    for generation in (None, "sm90"):
        pattern = build_glob(cuda130, "3.12", "2.13", generation)
        chosen = {b for b in every if fnmatch.fnmatchcase(b, pattern)}
        assert chosen == {v.build_string for v in plan(Selection(
            cuda="13.0", python="3.12", torch="2.13", generations=(generation,) if generation else None,
            packages=("causal-conv1d",)))}, pattern
    assert build_glob(cuda130, "3.12", "2.13", "sm90") == "cuda130_py312_torch213_sm90_*"
