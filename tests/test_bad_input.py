"""Fault injection: every subcommand with each bad input of tests/bad_input/ gives one line on stderr,
the right exit status, no traceback, and writes nothing."""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

import pytest
from ssm_conda import cli
from ssm_conda_dev import cli as dev_cli

from tests.bad_input import Case, Context
from tests.bad_input.registry import CASES


def snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path below root: (mode, size, mtime_ns); a folder's size and mtime are not compared."""
    seen = {}
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        directory = path.is_dir() and not path.is_symlink()
        seen[str(path.relative_to(root))] = (st.st_mode, 0 if directory else st.st_size, 0 if directory else st.st_mtime_ns)
    return seen


def changed(before: dict, after: dict, allowed: tuple[str, ...]) -> list[str]:
    paths = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    return sorted(p for p in paths if not any(fnmatch.fnmatch(p, pattern) for pattern in allowed))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bad_input_is_one_line_and_writes_nothing(case: Case, tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "SSM_CONDA_CACHE": str(home / "cache"), "XDG_CACHE_HOME": str(home / "xdg-cache")}
    context = Context(tmp=tmp_path, env=env, values={"tmp": str(tmp_path)})
    monkeypatch.chdir(tmp_path)
    try:
        if case.setup:
            case.setup(context)
        for name, value in context.env.items():
            monkeypatch.setenv(name, value)
        before = snapshot(tmp_path)
        argv = [word.format(**context.values) for word in case.argv]
        status = (dev_cli.main if case.dev else cli.main)(argv)  # an exception here is the traceback a user would see
        out, err = capsys.readouterr()
        after = snapshot(tmp_path)
    finally:
        for cleanup in reversed(context.cleanups):
            cleanup()
    lines = err.strip().splitlines()
    assert "Traceback" not in out + err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert case.message in lines[0], lines[0]
    assert status == case.status, (status, lines[0])
    assert not changed(before, after, case.may_write), changed(before, after, case.may_write)
    assert os.getcwd() == str(tmp_path)


def test_docs_count_the_cases():
    from tests.repo import REPO_ROOT

    assert f"module per subcommand: {len(CASES)} cases)" in (REPO_ROOT / "docs" / "testing.md").read_text()
