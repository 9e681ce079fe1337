"""ssm-conda-dev bench-build (its bad input: tests/bad_input/bench_build.py; the benchmark itself is real builds)."""

import argparse
import subprocess
from pathlib import Path

import pytest


def test_report_prints_every_ratio_and_writes_the_figures(tmp_path, capsys):
    import json

    from ssm_conda_dev.benchmarks.build_times import Timing, report

    timings = [Timing("variant A", "3.11", "9.0", "cold", 356.0, 21_861_976, "0/4"),
               Timing("variant B", "3.12", "9.0", "warm", 42.4, 21_861_789, "3/4")]
    path = tmp_path / "figures.json"
    ratios = [("warm B / cold A", 42.4 / 356.0, "< 0.33")]
    report(timings, ratios, argparse.Namespace(json=False, json_file=str(path), output_dir=None))
    out = capsys.readouterr().out
    assert "warm B / cold A: 0.12 (target < 0.33)" in out
    assert any(line.split()[:2] == ["variant", "B"] and "3/4" in line for line in out.splitlines())
    figures = json.loads(path.read_text())
    assert figures["warm B / cold A"] == 42.4 / 356.0 and figures["builds"][1]["hits"] == "3/4"
    # --json: the same figures on stdout, and nothing else there
    report(timings, ratios, argparse.Namespace(json=True, json_file=None, output_dir=None))
    assert json.loads(capsys.readouterr().out) == figures


class FakeBuilds:
    """Stands in for ssm-conda build (the builds are the benchmark): writes a package of the size and
    build string each (generation, line tables) would have, and records what was built."""

    SIZES = {"all": 60e6, "sm8x": 20e6, "sm90": 9e6, "sm10x": 10e6, "sm12x": 10e6, "9.0": 9e6}

    def __init__(self):
        self.built = []

    def __call__(self, name, args, python, arch, cache_dir, cache, line_info, store):  # noqa: ANN001, ANN204
        from ssm_conda_dev.benchmarks import build_times as bt

        self.built.append((arch, line_info, cache_dir))
        tables = "_lineinfo" if line_info else ""
        package = store / "linux-64" / f"causal-conv1d-1.7.0-cuda130_py311_torch214_{arch}{tables}_h1234567_0.conda"
        package.parent.mkdir(parents=True, exist_ok=True)
        package.write_bytes(b"")
        size = int(self.SIZES[arch] * (1.75 if line_info else 1))
        seconds = (100.0 if arch == "all" else 40.0) * (1.2 if line_info else 1)
        return bt.Timing(name, python, arch, cache, seconds, size, "-", str(package.relative_to(store)))


@pytest.fixture
def bench(monkeypatch, tmp_path):
    """bench-build's run() over fake builds and a fake solver that picks the sm90 package for an H100."""
    from types import SimpleNamespace

    from ssm_conda_dev.benchmarks import build_times as bt

    fake, asked = FakeBuilds(), []

    def fake_solve(channels, specs, cuda=None, cuda_arch=None):  # noqa: ANN001, ANN202
        asked.append((specs, cuda, cuda_arch))
        channel = Path(channels[0].removeprefix("file://"))  # the generations' channel, before --channel
        (h100,) = [p.name for p in channel.glob("linux-64/*_sm90_*.conda")]  # what the benchmark copied there
        return [SimpleNamespace(name=SimpleNamespace(normalized="causal-conv1d"), file_name=h100)]

    monkeypatch.setattr(bt, "timed_build", fake)
    monkeypatch.setattr(bt, "solve_for_machine", fake_solve)
    monkeypatch.setattr(bt, "index_channel", lambda path: (path / "linux-64" / "repodata.json").write_text("{}"))

    def run(*argv):
        parser = argparse.ArgumentParser()
        bt.configure(parser)
        args = parser.parse_args([*argv, "--channel", str(tmp_path), "--json-file", str(tmp_path / "f.json")])
        assert bt.run(args) == 0
        return fake.built, asked

    return run


def test_generations_compares_what_the_solver_picks_for_an_h100(bench, capsys):
    """Every generation built once without the cache, the H100's package found by solving the channel
    they were copied into, the figures against the baseline."""
    built, asked = bench("generations")
    assert built == [(g, False, None) for g in ("all", "sm8x", "sm90", "sm10x", "sm12x")]
    assert asked == [(["causal-conv1d"], "13.0", "9.0")]
    out = capsys.readouterr().out
    assert "H100 download (sm90, 9.0 MB) / 184.0 MB: 0.05" in out
    assert "all-architecture package (60.0 MB) / 184.0 MB: 0.33" in out
    assert "channel build time, every generation (4m20s) / all-architecture alone (1m40s): 2.60" in out


def test_lineinfo_builds_each_generation_without_and_with_line_tables(bench, capsys):
    built, _ = bench("lineinfo")
    assert built == [("sm90", False, None), ("sm90", True, None), ("all", False, None), ("all", True, None)]
    out = capsys.readouterr().out
    assert "sm90: package with / without line tables: 1.75" in out and "all: build time with / without: 1.20" in out


def test_benchmarks_named_together_share_their_builds(bench, capsys, tmp_path):
    """generations and lineinfo in one run: the packages without line tables that both need are
    built once, and each build is one row of the figures."""
    import json

    built, asked = bench("lineinfo", "generations", "--output-dir", str(tmp_path / "kept"))
    # generations first (BENCHMARKS' order), then only what lineinfo adds
    assert built == [(g, False, None) for g in ("all", "sm8x", "sm90", "sm10x", "sm12x")] + [
        ("sm90", True, None), ("all", True, None)]
    assert len(asked) == 1
    out = capsys.readouterr().out
    assert "H100 download (sm90, 9.0 MB) / 184.0 MB: 0.05" in out
    assert "all: package with / without line tables: 1.75" in out
    figures = json.loads((tmp_path / "f.json").read_text())
    assert [b["name"] for b in figures["builds"]] == ["all", "sm8x", "sm90", "sm10x", "sm12x",
                                                       "sm90 with line tables", "all with line tables"]
    kept = sorted(p.name for p in (tmp_path / "kept" / "linux-64").glob("*.conda"))
    assert len(kept) == 7 and (tmp_path / "kept" / "linux-64" / "repodata.json").exists()
    assert all((tmp_path / "kept" / b["package"]).exists() for b in figures["builds"])


def test_a_build_with_the_compiler_cache_is_never_shared(bench):
    """cache's builds depend on the cache's state: variant A and A rebuilt are two builds."""
    built, _ = bench("cache")
    assert [arch for arch, _, _ in built] == ["9.0", "9.0", "9.0"] and all(cache for _, _, cache in built)


def test_timed_build_runs_ssm_conda_build_and_keeps_its_package(monkeypatch, tmp_path):
    """The one real step, its subprocess faked: the command line, the package copied into the store,
    the generation's list shown, the log kept."""
    from ssm_conda_dev.benchmarks import build_times as bt

    commands = []

    def fake_run(command, env):  # noqa: ANN001, ANN202
        commands.append((command, env))
        output = Path(command[command.index("--output-dir") + 1])
        (output / "linux-64").mkdir()
        (output / "linux-64" / "causal-conv1d-1.7.0-cuda130_py311_torch214_sm90_h1_0.conda").write_bytes(b"x" * 123)
        (output / "build-logs").mkdir()
        (output / "build-logs" / "causal-conv1d.log").write_text("compiling\n")
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(bt.subprocess, "run", fake_run)
    args = argparse.Namespace(package="causal-conv1d", channel="file:///standin", cuda="13.0", torch="2.14",
                              generations={"all": "7.5;9.0+PTX", "sm90": "9.0+PTX"}, log_dir=str(tmp_path / "logs"))
    timing = bt.timed_build("sm90 with line tables", args, "3.11", "sm90", None, "off", True, tmp_path / "store")
    ((command, env),) = commands
    assert command[command.index("--generation") + 1] == "sm90"
    assert "--line-info" in command and "--no-cache" in command and "--test" in command
    assert bt.CCACHE_ENV not in env
    assert timing.arch == "sm90: 9.0+PTX" and timing.size == 123
    assert (tmp_path / "store" / timing.package).read_bytes() == b"x" * 123
    assert (tmp_path / "logs" / "sm90-with-line-tables-causal-conv1d.log").read_text() == "compiling\n"
    # an architecture list is passed as --arch, without line tables unless asked
    commands.clear()
    timing = bt.timed_build("one arch", args, "3.11", "9.0", None, "off", False, tmp_path / "store")
    ((command, _),) = commands
    assert command[command.index("--arch") + 1] == "9.0" and "--line-info" not in command and timing.arch == "9.0"
