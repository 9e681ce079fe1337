"""One vocabulary across ssm-conda and ssm-conda-dev: every subcommand's parser (upload's targets too) is walked;
an option name means one thing wherever it appears, and one meaning has one name."""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Iterator

import pytest
from ssm_conda import cli, options
from ssm_conda.matrix import PLATFORMS
from ssm_conda.project import NAMES
from ssm_conda_dev import cli as dev_cli

TOOLS = (cli.SSM_CONDA, dev_cli.SSM_CONDA_DEV)
# What the value of each shared option is: every help text of the name says it (ssm_conda.options writes them).
VALUES = {
    "--channel": options.CHANNEL_FORMS,
    "--variants-dir": "the folder of variant files to read",
    "--output-dir": "output channel",
    "--target-platform": "the conda platform",
    "--package": "(repeatable",
}
# Names other tools use for a meaning that has its name here.
SYNONYMS = {
    "--platform": "--target-platform", "--subdir": "--target-platform", "--dir": "--output-dir", "--out": "--output-dir",
    "--output": "--output-dir", "--outdir": "--output-dir", "--output-folder": "--output-dir", "--channels": "--channel",
    "--packages": "--package", "--pkg": "--package", "--variants": "--variants-dir", "--variant-dir": "--variants-dir",
    "--variant-config-files": "--variants-dir", "--m": "--variants-dir", "--verbosity": "--verbose", "--logs": "--log-dir",
}
# Deliberate differences, each with its reason: (command, option) -> why.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("bench-build", "--package"): "one value: the benchmark times the builds of one package, its figures are that package's",
}


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found = [a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(found[0]) if found else {}


def every_option() -> Iterator[tuple[str, argparse.Action]]:
    """(the command as typed, an option of its parser) for every subcommand of both tools, and upload's targets."""
    for tool in TOOLS:
        for command in tool.commands:
            parser = subparsers(cli.build_parser([command.name], tool))[command.name]
            named = [(f"{tool.prog} {command.name}", parser)]
            named += [(f"{tool.prog} {command.name} {name}", child) for name, child in subparsers(parser).items()]
            for where, each in named:
                for action in each._actions:
                    if action.option_strings and not isinstance(action, argparse._HelpAction):
                        yield where, action


def signature(action: argparse.Action) -> tuple[object, ...]:
    """What an option accepts: its kind (flag, one value, repeatable), its type and choices, its other names."""
    choices = tuple(action.choices) if action.choices is not None else None
    return type(action).__name__, action.nargs, action.type, choices, tuple(sorted(action.option_strings))


def long_name(action: argparse.Action) -> str:
    return next((s for s in action.option_strings if s.startswith("--")), action.option_strings[0])


OPTIONS = list(every_option())


def test_the_walk_sees_every_command() -> None:
    seen = {where.split()[1] for where, _ in OPTIONS}
    assert seen == {c.name for tool in TOOLS for c in tool.commands}
    assert any(where == "ssm-conda upload prefix" for where, _ in OPTIONS)


def test_one_name_has_one_meaning() -> None:
    """The same name accepts the same values (flag, one value or repeatable; type; choices) everywhere."""
    by_name: dict[str, dict[tuple[object, ...], list[str]]] = defaultdict(lambda: defaultdict(list))
    for where, action in OPTIONS:
        if (where.split(maxsplit=1)[1], long_name(action)) not in EXCEPTIONS:
            by_name[long_name(action)][signature(action)].append(where)
    differing = {name: dict(kinds) for name, kinds in by_name.items() if len(kinds) > 1}
    assert not differing, differing


def test_every_shared_option_says_what_its_value_is() -> None:
    """Help texts may differ in what each command does with the value, never in what the value is."""
    wrong = [(where, long_name(a), a.help) for where, a in OPTIONS if long_name(a) in VALUES
             and VALUES[long_name(a)] not in (a.help or "") and (where.split(maxsplit=1)[1], long_name(a)) not in EXCEPTIONS]
    assert not wrong, wrong
    missing = [(where, long_name(a)) for where, a in OPTIONS if not a.help]
    assert not missing, missing


@pytest.mark.parametrize(("meaning", "name"), [
    (lambda a: a.choices is not None and tuple(a.choices) == PLATFORMS, "--target-platform"),
    (lambda a: a.choices is not None and tuple(a.choices) == NAMES, "--package"),
    (lambda a: options.CHANNEL_FORMS in (a.help or ""), "--channel"),
    (lambda a: "variant files" in (a.help or "") and a.dest.endswith("dir"), "--variants-dir"),
], ids=["platform", "package", "channel", "variants"])
def test_one_meaning_has_one_name(meaning, name: str) -> None:  # noqa: ANN001
    others = [(where, long_name(a)) for where, a in OPTIONS if meaning(a) and long_name(a) != name
              and (where.split(maxsplit=1)[1], long_name(a)) not in EXCEPTIONS]
    assert not others, others


def test_no_synonym_of_a_name_in_the_vocabulary() -> None:
    used = [(where, s, SYNONYMS[s]) for where, a in OPTIONS for s in a.option_strings if s in SYNONYMS]
    assert not used, used


def test_the_exceptions_are_still_needed() -> None:
    """An exception whose option no longer differs goes from the list."""
    present = {(where.split(maxsplit=1)[1], long_name(a)) for where, a in OPTIONS}
    assert set(EXCEPTIONS) <= present, set(EXCEPTIONS) - present
