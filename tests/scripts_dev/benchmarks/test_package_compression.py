"""ssm-conda-dev bench-zstd: a package re-packed by rattler's writer at each level; bad input exits 2."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ssm_conda_dev", "bench-zstd", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    """A small linux-64 package whose file compresses better at a higher level (repetitive, not trivial)."""
    from rattler_build import assemble_package

    root = tmp_path_factory.mktemp("pkg")
    files = root / "files" / "lib"
    files.mkdir(parents=True)
    words = [f"{i * 2654435761 % 99991:05d}" for i in range(20000)]
    (files / "data.txt").write_text(" ".join(words * 4))
    channel = root / "channel" / "linux-64"
    channel.mkdir(parents=True)
    written = assemble_package("demo", "1.0", "linux-64", "h0_0", channel, files_dir=root / "files",
                               compression_level=3, detect_prefix=False)
    return Path(written.path)


def test_each_level_is_measured_against_the_first(package):
    result = bench(str(package), "--levels", "1", "19", "--threads", "1", "--json")
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout[result.stdout.index("["):])
    assert [(f["package"], f["level"]) for f in figures] == [(package.name, 1), (package.name, 19)]
    assert figures[1]["size"] < figures[0]["size"]
    assert all(f["seconds"] > 0 for f in figures)


def test_a_channel_directory_names_its_packages(package):
    result = bench(str(package.parents[1]), "--levels", "3", "--threads", "1")
    assert result.returncode == 0, result.stderr
    assert any(line.split()[:2] == [package.name, "3"] for line in result.stdout.splitlines())


@pytest.mark.parametrize(("args", "message"), [
    (["--levels", "23"], "error: --levels 23: zstd levels are 1 to 22"),
    (["--threads", "0"], "error: --threads 0: give 1 or more"),
])
def test_bad_input_is_one_line_and_exit_2(package, args, message):
    result = bench(str(package), *args)
    assert result.returncode == 2 and result.stderr.strip() == message


def test_nothing_to_measure(tmp_path):
    result = bench(str(tmp_path))
    assert result.returncode == 2 and result.stderr.strip() == f"error: no .conda package in {tmp_path}"
    assert not os.listdir(tmp_path)
