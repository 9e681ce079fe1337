"""ssm-conda plan and build: plan output, bad input, channels. (The real build is tests/test_end_to_end.py.)"""

import contextlib
import dataclasses
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from ssm_conda import build, channels, cli
from ssm_conda.channels import index_channel
from ssm_conda.compiler_cache import CCACHE_ENV, configure_compiler_cache
from ssm_conda.matrix import TARGET_PLATFORM, PlannedVariant, plan
from ssm_conda.reproducible import EPOCH_FILE
from ssm_conda.selection import Selection

from tests.bad_input import read_only
from tests.bad_input.build import ONE
from tests.bad_input.gpu_check import tiny_package
from tests.rendered import whole_matrix
from tests.repo import REPO_ROOT, VARIANTS_DIR


def run_cli(*args: str, cwd=REPO_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ssm_conda", *args],
                          cwd=cwd, capture_output=True, text=True)


def test_plan_prints_the_whole_matrix():
    result = run_cli("plan")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["package", "CUDA", "Python", "torch", "generation", "archs", "build", "string"]
    for variant in whole_matrix():
        assert any(variant.build_string in line and f" {variant.generation} " in line and variant.archs in line
                   and variant.package in line for line in lines)
    assert lines[-1] == f"{len(whole_matrix())} variant(s)"


def test_plan_with_selectors_and_overrides():
    result = run_cli("plan", "--cuda", "13.0", "--python", "3.11", "--torch", "2.14", "--arch", "9.0")
    assert result.returncode == 0, result.stderr
    assert "cuda130_cp311abi3_torch214_custom_h" in result.stdout and "2 variant(s)" in result.stdout
    assert " 3.11+ " in result.stdout  # the package serves 3.11 and later
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines[1:3]] == ["causal-conv1d", "mamba-ssm"]


@pytest.mark.parametrize(("platform", "archs"), [("linux-aarch64", "8.0;8.6;8.7+PTX"), ("linux-64", "8.0;8.6+PTX")])
def test_plan_renders_another_platform(capsys, platform, archs):
    """linux-aarch64's lists carry 8.7 (Jetson Orin), as conda-forge's pytorch does there."""
    assert cli.main(["plan", "--cuda", "13.0", "--python", "3.12", "--torch", "2.13", "--generation", "sm8x",
                     "--target-platform", platform]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:-1]]
    assert [(row[0], row[5]) for row in rows] == [("causal-conv1d", archs), ("mamba-ssm", archs)]
    assert cli.main(["plan", "--target-platform", "osx-arm64"]) == 2
    assert "invalid choice: 'osx-arm64' (choose from 'linux-64', 'linux-aarch64', 'win-64')" in capsys.readouterr().err


def test_plan_renders_windows_causal_conv1d_alone(capsys):
    """mamba-ssm's recipe skips win-64 (triton), and CUDA 12.9 has no Windows line (tests/recipe/test_windows.py)."""
    assert cli.main(["plan", "--python", "3.12", "--torch", "2.13", "--generation", "sm90", "--target-platform", "win-64"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:-1]]
    assert [(row[0], row[1], row[5]) for row in rows] == [("causal-conv1d", "13.0", "9.0+PTX")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cuda", "12.0"], "error: unknown CUDA version '12.0'; accepted: 12.9, 13.0"),
        (["--python", "three"], "error: unknown Python version 'three'"),
        (["--torch", "2"], "error: unknown pytorch version '2'"),
        (["--cuda", "13.0", "--arch", "9.5"], "error: unknown architecture '9.5' for CUDA 13.0"),
        (["--channel", "ftp://example.org/x"], "error: channel 'ftp://example.org/x' is not a channel name"),
        (["--channel", "file:///no/such/dir"], "error: channel 'file:///no/such/dir': /no/such/dir is not a directory"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_built(tmp_path, args, message):
    out = tmp_path / "out"
    result = run_cli("build", "--output-dir", str(out), *args, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().startswith(message), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_compiler_cache_inside_the_output_channel_is_refused(tmp_path):
    out = tmp_path / "out"
    env_cache = str(out / "ccache")
    result = subprocess.run(
        [sys.executable, "-m", "ssm_conda", "build", "--output-dir", str(out),
         "--cuda", "13.0", "--python", "3.11", "--torch", "2.14", "--arch", "9.0"],
        cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "SSM_CONDA_CCACHE_DIR": env_cache},
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: SSM_CONDA_CCACHE_DIR={env_cache} is inside the output channel {out}; put it elsewhere"
    )
    assert not out.exists()


def test_no_cache_unsets_the_build_secret(monkeypatch, tmp_path):
    monkeypatch.setenv(CCACHE_ENV, str(tmp_path / "cache"))
    assert build_options(cli.parse_args(["build", "--no-cache"])).compiler_cache is None
    configure_compiler_cache(None)
    assert CCACHE_ENV not in os.environ
    monkeypatch.setenv(CCACHE_ENV, str(tmp_path / "cache"))
    cache = build_options(cli.parse_args(["build", "--output-dir", str(tmp_path / "out")])).compiler_cache
    assert cache == tmp_path / "cache"
    configure_compiler_cache(cache)
    assert os.environ[CCACHE_ENV] == str(tmp_path / "cache") and (tmp_path / "cache").is_dir()


def build_options(args, environ=None) -> build.BuildOptions:  # noqa: ANN001
    return build.BuildOptions.from_args(args, os.environ if environ is None else environ)


def test_options_are_resolved_once_from_the_arguments_and_the_environment(tmp_path):
    """The whole command line and the variables build reads become one frozen object; nothing below reads them."""
    args = cli.parse_args(["build", "-c", str(tmp_path), "-c", "conda-forge", "--package", "mamba-ssm", "--cuda", "13.0",
                           "--generation", "sm90", "--generation", "sm90", "--target-platform", "linux-aarch64",
                           "--output-dir", str(tmp_path / "out"), "--variants-dir", str(VARIANTS_DIR), "--line-info",
                           "--skip-existing", "--test", "skip", "-v"])
    chosen = build_options(args, {CCACHE_ENV: str(tmp_path / "cc"), "RATTLER_CACHE_DIR": str(tmp_path / "rattler"),
                                  "SSM_CONDA_BUILD_ROOT": str(tmp_path / "root")})
    assert chosen == build.BuildOptions(
        build.PlanOptions(Selection(cuda="13.0", generations=("sm90",), packages=("mamba-ssm",)),
                          (tmp_path.as_uri(), "conda-forge"), VARIANTS_DIR, "linux-aarch64", True, True),
        tmp_path / "out", True, "skip", tmp_path / "cc", tmp_path / "rattler" / "pkgs", tmp_path / "root")
    with pytest.raises(dataclasses.FrozenInstanceError):
        chosen.test = "native"  # type: ignore[misc]
    default = build_options(cli.parse_args(["build"]), {})
    assert default.output_dir == REPO_ROOT / "output" and default.plan.channels == ("conda-forge",)
    assert default.plan.variants_dir == VARIANTS_DIR and default.plan.target_platform == TARGET_PLATFORM
    assert default.build_root == Path("/tmp/ssm-conda-build")  # recorded in the packages: the same for everyone
    assert default.package_cache == Path.home() / ".cache" / "rattler" / "cache" / "pkgs"
    # rattler's own folder for it: the XDG cache, or Windows' %LOCALAPPDATA% (the CI's Windows jobs set neither)
    for variable in ("XDG_CACHE_HOME", "LOCALAPPDATA"):
        chosen = build_options(cli.parse_args(["build"]), {variable: str(tmp_path / variable)})
        assert chosen.package_cache == tmp_path / variable / "rattler" / "cache" / "pkgs"


def options_for(tmp_path, channels=("conda-forge",), skip_existing=False) -> build.BuildOptions:  # noqa: ANN001
    plan_options = build.PlanOptions(Selection(), tuple(channels), VARIANTS_DIR, TARGET_PLATFORM, False, False)
    (tmp_path / "root").mkdir(mode=0o700, exist_ok=True)  # the build root build_one builds in (run holds it)
    return build.BuildOptions(plan_options, tmp_path / "out", skip_existing, "skip", None, tmp_path / "rattler" / "pkgs",
                              tmp_path / "root")


def fake_variant(cuda: str, run_build) -> PlannedVariant:  # noqa: ANN001
    recipe = SimpleNamespace(package=SimpleNamespace(name="causal-conv1d", version="1.7.0"))
    rendered = SimpleNamespace(recipe=recipe, run_build=run_build)
    return PlannedVariant(cuda, "3.10", "2.13", "9.0+PTX", "sm90", "cuda130_cp310abi3_torch213_sm90_h0_0", None,
                          {"c_stdlib_version": ["2.28"]}, rendered)


@pytest.mark.parametrize(("user_value", "expected"), [(None, ("13.0", "9.0")), (("12.4", "8.6"), ("12.4", "8.6"))])
def test_builds_solve_for_the_variants_cuda_and_generation_whatever_the_machine(tmp_path, monkeypatch, user_value, expected):
    """A 12.x driver and an A100 building cuda130's sm90 package: __cuda must say 13.0 and __cuda_arch
    9.0 (or what the user set) during the build, or its test environment does not solve."""
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\necho '0, NVIDIA A100-SXM4-80GB, 8.0, 550.54.14'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    names = ("CONDA_OVERRIDE_CUDA", "CONDA_OVERRIDE_CUDA_ARCH")
    for name, value in zip(names, user_value or (None, None), strict=True):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    seen, machine = [], []

    def run_build(**kwargs):  # noqa: ANN003
        seen.append(tuple(os.environ.get(name) for name in names))
        # what the package records of the build machine is the variant's (docs/reproducible.md)
        machine.append([os.environ.get(f"CONDA_OVERRIDE_{name}") for name in ("GLIBC", "LINUX", "ARCHSPEC")])
        # in the fixed build folder; the archive is written again at zstd level 19 (reproducible.repack)
        assert (kwargs["output_dir"], kwargs["no_build_id"]) == (str(tmp_path / "root"), True)
        assert kwargs["package_format"] == "conda:1"
        raise RuntimeError("stopped here")

    outcome = build.build_one(fake_variant("13.0", run_build), options_for(tmp_path))
    assert seen == [expected] and (outcome.result, outcome.detail.split(" (log")[0]) == ("failed", "stopped here")
    assert machine == [["2.28", "4.18", os.uname().machine]]
    assert tuple(os.environ.get(name) for name in names) == (user_value or (None, None))  # restored


def test_a_package_brings_what_it_needs_unless_the_channel_has_it(tmp_path):
    """--package mamba-ssm builds causal-conv1d first where the output channel lacks that variant."""
    selection = build.with_needs(Selection(cuda="13.0", python="3.12", torch="2.13", arch="9.0", packages=("mamba-ssm",)))
    assert selection.packages == ("causal-conv1d", "mamba-ssm")
    variants = plan(selection)
    assert [v.package for v in variants] == ["causal-conv1d", "mamba-ssm"]
    assert build.skip_present_needs(variants, ("mamba-ssm",), tmp_path) == variants
    (tmp_path / "linux-64").mkdir()
    (tmp_path / "linux-64" / f"causal-conv1d-1.7.0-{variants[0].build_string}.conda").write_bytes(b"")
    assert [v.package for v in build.skip_present_needs(variants, ("mamba-ssm",), tmp_path)] == ["mamba-ssm"]
    # asked for explicitly, it is built again (or skipped by --skip-existing, rattler-build's own check)
    assert build.skip_present_needs(variants, ("causal-conv1d", "mamba-ssm"), tmp_path) == variants


def test_mamba_ssm_shares_the_variant_scheme_and_pins():
    """Both packages of one variant: the same build string, mamba-ssm's run pins the torch minor and causal-conv1d."""
    cc, mamba = plan(Selection(cuda="13.0", python="3.12", torch="2.13", arch="9.0"))
    assert (cc.package, mamba.package) == ("causal-conv1d", "mamba-ssm")
    assert cc.build_string == mamba.build_string
    run = [str(r) for r in mamba.rendered.recipe.requirements.run]
    assert "pytorch 2.13.* cuda*" in run and "causal-conv1d >=1.7,<2" in run
    assert not any(name in " ".join(run) for name in ("tilelang", "quack", "tvm", "ninja"))


def test_a_rebuild_is_not_tested_from_rattlers_package_cache(tmp_path):
    """Same name, version and build string after a recipe change: the extracted old package goes."""
    stem = "causal-conv1d-1.7.0-cuda130_py311_torch214_he733e5d_0"
    (tmp_path / stem / "info").mkdir(parents=True)
    (tmp_path / f"{stem}.lock").write_text("")
    (tmp_path / "mamba-ssm-2.3.2.post1-cuda130_py311_torch214_he733e5d_0").mkdir()
    removed = build.evict_from_package_cache("causal-conv1d", "1.7.0", "cuda130_py311_torch214_he733e5d_0", tmp_path)
    assert sorted(p.name for p in removed) == [stem, f"{stem}.lock"]
    assert [p.name for p in tmp_path.iterdir()] == ["mamba-ssm-2.3.2.post1-cuda130_py311_torch214_he733e5d_0"]


def test_line_info_is_a_variant_of_its_own():
    """--line-info builds the packages with nvcc's line tables: another hash, so another build string."""
    plain = run_cli("plan", "--cuda", "13.0", "--python", "3.12", "--torch", "2.13", "--generation", "sm90")
    lines = run_cli("plan", "--cuda", "13.0", "--python", "3.12", "--torch", "2.13", "--generation", "sm90", "--line-info")
    assert plain.returncode == lines.returncode == 0, plain.stderr + lines.stderr
    strings = [re.findall(r"cuda130_cp312abi3_torch213_sm90_h[0-9a-f]{7}_0", r.stdout) for r in (plain, lines)]
    assert len(strings[0]) == len(strings[1]) == 2 and not set(strings[0]) & set(strings[1])


def test_plan_reads_the_variants_dir_and_verbose_shows_each_variants_keys(tmp_path, capsys):
    """--variants-dir as on every command that reads variant files; -v: what each build string's hash covers."""
    (tmp_path / "cuda129.yaml").write_text((VARIANTS_DIR / "cuda129.yaml").read_text())
    assert cli.main(["plan", "--variants-dir", str(tmp_path), "--python", "3.12", "--torch", "2.13", "-v"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "2 variant(s)" and all("cuda129_cp312abi3_torch213_all_h" in line for line in lines[-3:-1])
    keys = [line for line in lines if line.startswith(("causal-conv1d cuda129", "mamba-ssm cuda129"))]
    assert len(keys) == 2 and all("'cuda_compiler_version': ['12.9']" in line and "'pytorch': ['2.13']" in line for line in keys)
    assert cli.main(["plan", "--variants-dir", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err == f"error: variant files: no such directory: {tmp_path / 'none'}\n"


def test_plan_asks_no_channel(capsys):
    """plan renders the recipes offline: a channel that refuses every connection changes nothing."""
    assert cli.main(["plan", "-c", "http://127.0.0.1:9/", *ONE]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 variant(s)"


def build_in_process(tmp_path, monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    monkeypatch.setenv("SSM_CONDA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(CCACHE_ENV, raising=False)
    status = cli.main(["build", *ONE, "--output-dir", str(tmp_path / "out"), *args])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize(("channel", "status", "message"), [
    ("http://127.0.0.1:9/", 1, "error: cannot read the repodata of http://127.0.0.1:9/ (linux-64): error sending request "
     "for url (http://127.0.0.1:9/linux-64/repodata.json) (Connection refused (os error 111))"),
    ("{tmp}", 2, "error: channel file://{tmp} is not a conda channel: it has no repodata.json for linux-64, noarch"),
])
def test_a_channel_that_does_not_answer_is_named_before_any_variant_starts(tmp_path, monkeypatch, capsys, channel, status,
                                                                           message):
    """Before, each variant downloaded its sources, then failed "Failed to resolve dependencies" (240 times, ~10 min),
    never naming the channel, and left src_cache/ and build-logs/ behind."""
    (tmp_path / "folder").mkdir()
    folder = str(tmp_path / "folder")
    code, out, err = build_in_process(tmp_path, monkeypatch, capsys, "-c", channel.format(tmp=folder))
    assert (code, err.splitlines()) == (status, [message.format(tmp=folder)])
    assert "building" not in out and "compiler cache" not in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]  # no output folder, no compiler cache


@pytest.mark.parametrize("bad", ["output is a file", "output is read-only", "cache is read-only", "cache is a file"])
def test_a_folder_it_cannot_write_stops_it_before_anything_is_created(tmp_path, monkeypatch, capsys, bad):
    """Before, a traceback after "building 1 variant(s)", with the compiler cache's folder created."""
    channel = tmp_path / "channel"
    tiny_package(channel)
    index_channel(channel)
    target = tmp_path / ("out" if bad.startswith("output") else "cc")
    if bad.endswith("a file"):
        target.write_text("")
    else:
        target.mkdir()
    monkeypatch.setenv(CCACHE_ENV, str(tmp_path / "cc"))
    with read_only(target) if bad.endswith("read-only") else contextlib.nullcontext():
        status = cli.main(["build", *ONE, "--output-dir", str(tmp_path / "out"), "-c", str(channel)])
    out, err = capsys.readouterr()
    why = "is not a directory" if bad.endswith("a file") else "is not writable (name a folder you can write to)"
    what = "--output-dir" if bad.startswith("output") else CCACHE_ENV
    assert (status, err.splitlines()) == (2, [f"error: {what}={target}: {target} {why}"])
    assert "building" not in out
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["channel", "recipe-causal-conv1d", target.name])


def test_each_channel_and_subdir_is_asked_for_its_repodata_once(tmp_path, monkeypatch, capsys):
    """Once per build, not per variant: the host's subdir, the build machine's (a cross build) and noarch."""
    channel = tmp_path / "channel"
    tiny_package(channel)
    index_channel(channel)
    asked, given = [], []
    real = channels.fetch_repodata
    monkeypatch.setattr(channels, "fetch_repodata", lambda channel, subdir: asked.append(subdir) or real(channel, subdir))
    monkeypatch.setattr(build, "build_one", lambda variant, options, repodata: given.append(repodata) or
                        build.Outcome(variant.package, variant.label, "ok"))
    for platform in ("linux-64", "linux-aarch64"):
        asked.clear()
        status, _out, _err = build_in_process(tmp_path, monkeypatch, capsys, "-c", str(channel), "--package", "mamba-ssm",
                                              "--target-platform", platform, "--no-cache")
        assert status == 0
        assert asked == list(dict.fromkeys([platform, "linux-64", "noarch"]))
    assert len(given) == 4 and {r.subdir for r in given[0]} == {"linux-64", "noarch"}


def test_a_requirement_no_channel_has_is_named_with_the_channels_searched(tmp_path, monkeypatch):
    """py-rattler-build says only "Failed to resolve dependencies": a real failed solve, named."""
    from rattler_build import Stage0Recipe, VariantConfig

    channel = tmp_path / "channel"
    tiny_package(channel)
    index_channel(channel)
    recipe = Stage0Recipe.from_yaml('package: {name: causal-conv1d, version: "1.7.0"}\nbuild: {number: 0, script: [echo]}\n'
                                    'requirements: {host: [causal-conv1d 1.7.*, "pytorch 2.13.* cuda*"]}\n',
                                    recipe_dir=tmp_path / "recipe")
    (rendered,) = recipe.render(VariantConfig())
    variant = replace(fake_variant("13.0", None), rendered=rendered)
    uri = channel.as_uri()
    repodata = channels.channel_repodata([uri], [TARGET_PLATFORM, "noarch"])
    outcome = build.build_one(variant, options_for(tmp_path, [uri]), repodata)
    assert outcome.failed
    expected = (f"cannot resolve ({TARGET_PLATFORM}, noarch): No candidates were found for pytorch 2.13.* cuda*. "
                f"Channels searched: {uri} (log: ")
    assert outcome.detail.startswith(expected), outcome.detail
    other_shape = RuntimeError("Failed to resolve dependencies")
    other_shape.log = ["Specs:", "   - python"]  # no Platform: line
    assert build.unresolvable(other_shape, [], [uri]) is None  # rattler-build's own message then stands


def test_a_built_package_is_servable_at_once(tmp_path):
    """rattler-build writes it 0600; an interrupted run never reaches the index that would set 0644."""
    built = tiny_package(tmp_path / "elsewhere")
    assert built.stat().st_mode & 0o777 == 0o600

    def run_build(**_kwargs):  # noqa: ANN003 (what rattler-build and recipe/shared/build-extension.sh leave)
        (tmp_path / "root" / "bld" / "rattler-build_causal-conv1d").mkdir(parents=True)
        (tmp_path / "root" / "bld" / "rattler-build_causal-conv1d" / EPOCH_FILE).write_text("1700000000\n")
        return SimpleNamespace(packages=[str(built)])

    outcome = build.build_one(fake_variant("13.0", run_build), options_for(tmp_path))
    assert (outcome.result, outcome.path) == ("ok", tmp_path / "out" / "noarch" / built.name)
    assert outcome.path.stat().st_mode & 0o777 == 0o644


def test_skip_existing_skips_a_variant_the_output_channel_has(tmp_path):
    (tmp_path / "out" / "linux-64").mkdir(parents=True)
    present = tmp_path / "out" / "linux-64" / "causal-conv1d-1.7.0-cuda130_cp310abi3_torch213_sm90_h0_0.conda"
    present.write_bytes(b"built before")
    variant = fake_variant("13.0", lambda **_: pytest.fail("built again"))
    outcome = build.build_one(variant, options_for(tmp_path, skip_existing=True))
    assert (outcome.result, outcome.path, outcome.size) == ("skipped", present, 12)
