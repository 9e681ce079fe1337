"""ssm_conda.doctor.advice: the variant chosen, the commands printed, and advise end to end (pure)."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

import pytest
from ssm_conda.doctor import advice as adv
from ssm_conda.doctor.advice import advise
from ssm_conda.doctor.facts import CondaInfo, EnvInfo, InstalledDist, conda_info
from ssm_conda.doctor.report import render_text
from ssm_conda.machine import DriverInfo, GpuInfo
from ssm_conda.matrix import generation_gates, load_variant_files

from tests.repo import REPO_ROOT
from tests.scripts.doctor.builders import (
    B300,
    CUDA129,
    CUDA130,
    FILES,
    GB10,
    H100,
    VERSIONS,
    conda_torch,
    driver,
    make_facts,
    pip_torch,
    variant,
)

CC = {"causal-conv1d": "1.7.0"}
PIXI_ENV = EnvInfo("pixi", "default", "/p/.pixi/envs/default", "/p/pixi.toml")


def codes(advice: adv.Advice) -> list[str]:
    return [w.code for w in advice.warnings]


# --- the variant ------------------------------------------------------------------------------


def test_torch_cuda_decides_even_with_a_newer_driver() -> None:
    vfile, reason = adv.choose_variant(make_facts(torch=conda_torch("2.12.1", "12.9")), FILES)
    assert vfile is CUDA129 and "built with CUDA 12.9" in reason
    assert adv.choose_variant(make_facts(torch=pip_torch("2.13.0+cu128", "12.8")), FILES)[0] is CUDA129


def test_without_torch_the_driver_decides() -> None:
    assert adv.choose_variant(make_facts(drv=driver(cuda="12.9")), FILES)[0] is CUDA129
    assert adv.choose_variant(make_facts(drv=driver(cuda="13.1")), FILES)[0] is CUDA130
    assert adv.choose_variant(make_facts(drv=driver(cuda="11.8")), FILES)[0] is CUDA129  # oldest: all too new
    assert adv.choose_variant(make_facts(drv=DriverInfo(), override="12.9"), FILES)[0] is CUDA129
    vfile, reason = adv.choose_variant(make_facts(drv=DriverInfo()), FILES)
    assert vfile is CUDA130 and "newest CUDA packaged" in reason
    assert adv.choose_variant(make_facts(), []) == (None, "")


# --- commands ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("caps", "vfile", "expected"),
    [
        ([], CUDA130, "all"),
        (["9.0"], CUDA130, "native"),
        (["10.3"], CUDA129, "native"),  # nvcc 12.9 builds sm_103 correctly
        (["10.3"], CUDA130, "10.0"),  # never sm_103 with nvcc 13 (#105): sm_100 code runs there
        (["9.0", "10.3"], CUDA130, "9.0;10.0"),
        (["8.6"], variant(cuda_arch_supported=["8.0;9.0"]), "8.0"),  # binary compatible within the major
        (["12.1"], variant(cuda_arch_supported=["8.0;9.0"]), "9.0+PTX"),  # another major: PTX
    ],
)
def test_build_arch_arg(caps: list[str], vfile, expected: str) -> None:
    assert adv.build_arch_arg(caps, vfile) == expected


def test_pixi_channel_is_prepended() -> None:
    """pixi's strict channel priority: a channel appended after conda-forge is never used for causal-conv1d."""
    facts = make_facts(torch=conda_torch(), env=PIXI_ENV)
    install = advise(facts, FILES, VERSIONS, ["https://prefix.dev/my-channel"]).install
    assert install == [
        "pixi workspace channel add --prepend https://prefix.dev/my-channel",
        'pixi add "causal-conv1d=1.7.0=cuda130_cp310abi3_torch213_*"',
    ]
    assert advise(facts, FILES, VERSIONS, ["conda-forge"]).install == [
        'pixi add "causal-conv1d=1.7.0=cuda130*py312*"'  # conda-forge's naming; no channel to add
    ]


def test_conda_channels_come_before_conda_forge() -> None:
    facts = make_facts(torch=conda_torch())
    assert adv.install_commands(facts, "13.0", "b_*", ["my-channel"], CC, "3.12") == [
        'conda install -c my-channel -c conda-forge "causal-conv1d=1.7.0=b_*"'
    ]
    no_driver = make_facts(drv=DriverInfo(), env=EnvInfo(None))
    assert adv.install_commands(no_driver, "13.0", "b_*", ["conda-forge"], CC, "3.12") == [
        'CONDA_OVERRIDE_CUDA=13.0 conda create -n causal-conv1d -c conda-forge python=3.12 "causal-conv1d=1.7.0=b_*"'
    ]


def test_every_channel_and_package_named_is_in_the_command() -> None:
    """-c and --package repeat: this project's channels in their order, then conda-forge; one spec per package."""
    facts = make_facts(torch=conda_torch())
    advice = advise(facts, FILES, VERSIONS, ["https://prefix.dev/a", "conda-forge", "/tmp/b c"], ["mamba-ssm", "causal-conv1d"])
    assert advice.install == ["conda install -c https://prefix.dev/a -c '/tmp/b c' -c conda-forge "
                              '"causal-conv1d=1.7.0=cuda130_cp310abi3_torch213_*" '
                              '"mamba-ssm=2.3.2.post1=cuda130_cp310abi3_torch213_*"']
    assert advice.build[0].startswith("ssm-conda build --package mamba-ssm --cuda 13.0 ")
    pixi = advise(replace(facts, env=PIXI_ENV), FILES, VERSIONS, ["a", "conda-forge", "b"], ["causal-conv1d"])
    assert pixi.install == ["pixi workspace channel add --prepend a b",
                            'pixi add "causal-conv1d=1.7.0=cuda130_cp310abi3_torch213_*"']
    alone = advise(make_facts(drv=DriverInfo(), env=EnvInfo(None)), FILES, VERSIONS, ["a"], ["causal-conv1d", "mamba-ssm"])
    assert alone.install[0].startswith("CONDA_OVERRIDE_CUDA=13.0 conda create -n mamba-ssm -c a -c conda-forge python=3.12 ")


def test_a_pip_wheel_is_uninstalled_first() -> None:
    facts = make_facts(torch=conda_torch(), wheel=InstalledDist("1.5.0.post8", "pip"))
    assert adv.install_commands(facts, "13.0", "b_*", ["c"], CC, "3.12")[0] == (
        "/opt/env/bin/python -m pip uninstall -y causal-conv1d"
    )


def test_installed_mamba_ssm_is_what_gets_installed() -> None:
    mamba, conv = InstalledDist("2.3.2.post1", "pip"), InstalledDist("1.5.0.post8", "pip")
    advice = advise(make_facts(torch=conda_torch(), mamba=mamba, wheel=conv), FILES, VERSIONS, ["my-channel"])
    assert advice.install == [
        "/opt/env/bin/python -m pip uninstall -y causal-conv1d mamba-ssm",
        'conda install -c my-channel -c conda-forge "mamba-ssm=2.3.2.post1=cuda130_cp310abi3_torch213_*"',
    ]
    assert advice.build[0].startswith("ssm-conda build --package mamba-ssm --cuda 13.0 ")
    assert "causal-conv1d-too-old" in codes(advice)


def test_local_channel_without_the_package_says_build_first(tmp_path: Path) -> None:
    (tmp_path / "linux-64").mkdir()
    (tmp_path / "linux-64" / "repodata.json").write_text("{}")
    advice = advise(make_facts(torch=conda_torch()), FILES, VERSIONS, [str(tmp_path)])
    assert advice.install[0] == f'conda install -c {tmp_path} -c conda-forge "causal-conv1d=1.7.0=cuda130_cp310abi3_torch213_*"'
    assert any("build it first" in n for n in advice.notes)
    (tmp_path / "linux-64" / "causal-conv1d-1.7.0-cuda130_cp310abi3_torch213_habc1234_0.conda").write_bytes(b"")
    advice = advise(make_facts(torch=conda_torch()), FILES, VERSIONS, [str(tmp_path)])
    assert not any("build it first" in n for n in advice.notes)


# --- advise end to end ------------------------------------------------------------------------


def test_h100_driver_580_torch_213_cu130_recommends_cuda130() -> None:
    facts = make_facts(torch=conda_torch("2.13.0", "13.0"))
    advice = advise(facts, FILES, VERSIONS, ["my-channel"])
    assert advice.cuda == "13.0" and advice.variant_file == "variants/cuda130.yaml"
    assert advice.build_string == "cuda130_cp310abi3_torch213_*"
    assert advice.install == ['conda install -c my-channel -c conda-forge "causal-conv1d=1.7.0=cuda130_cp310abi3_torch213_*"']
    assert advice.build == ["ssm-conda build --cuda 13.0 --torch 2.13 --arch native"]
    assert advice.warnings == [] and advice.missing == []
    text = render_text(facts, advice)
    assert "Install:" in text and "NVIDIA H100 80GB HBM3, compute capability 9.0 (sm_90)" in text


def test_h100_with_the_real_variant_files() -> None:
    files = load_variant_files()
    if "13.0" not in [f.cuda for f in files]:
        pytest.skip("no CUDA 13.0 variant file")
    assert advise(make_facts(torch=conda_torch("2.13.0", "13.0")), files, VERSIONS).cuda == "13.0"


def test_unpackaged_torch_minor_means_build() -> None:
    facts = make_facts(torch=conda_torch("2.11.0", "13.0"))
    advice = advise(facts, FILES, VERSIONS)
    assert advice.install == []
    assert advice.build == ["ssm-conda build --cuda 13.0 --torch 2.11 --arch native"]
    assert "No package fits; build it:" in render_text(facts, advice)


def test_gpu_no_package_covers_means_build() -> None:
    lacking = variant(gpu_generation=["all"], cuda_arch_list=["7.5;8.0;9.0;10.0"])
    advice = advise(make_facts(drv=driver(gpus=[GB10]), torch=conda_torch()), [lacking], VERSIONS)
    assert "arch-not-packaged" in codes(advice) and advice.install == []
    assert advice.build[0].endswith("--arch native")


def test_sm103_with_cuda13_installs_and_builds_sm100() -> None:
    facts = make_facts(drv=driver(gpus=[B300]), torch=conda_torch())
    advice = advise(facts, FILES, VERSIONS)
    assert "sm103-nvcc13" in codes(advice)
    assert advice.install  # the packaged sm_100 code runs on sm_103
    assert advice.build[0].endswith("--arch 10.0")


def test_stale_pip_wheel_and_pip_torch() -> None:
    wheel = InstalledDist("1.7.0", "pip")
    symbol = "ImportError: causal_conv1d_cuda.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"
    advice = advise(make_facts(torch=pip_torch(), wheel=wheel, extension_error=symbol), FILES, VERSIONS)
    assert {"pip-torch-in-conda-env", "extension-undefined-symbol"} <= set(codes(advice))
    assert advice.install[0].endswith("-m pip uninstall -y causal-conv1d")


def test_this_projects_pixi_env_gets_conda_create_and_a_note() -> None:
    env = EnvInfo("pixi", "default", manifest=str(REPO_ROOT), this_project=True)
    advice = advise(make_facts(torch=conda_torch(), env=env), FILES, VERSIONS, ["my-channel"])
    assert advice.install[0].startswith("conda create -n causal-conv1d -c my-channel -c conda-forge python=3.12 ")
    assert any("--interpreter" in n for n in advice.notes)


def test_no_variant_files() -> None:
    advice = advise(make_facts(torch=conda_torch()), [], VERSIONS)
    assert advice.cuda is None and advice.install == [] and advice.build == []
    assert any("no variant files" in m for m in advice.missing)


# --- GPU generations -----------------------------------------------------------------------------

# What doctor's command passes: the gates of the real recipes, rendered for the real variant files
REAL_GATES = {f.cuda: generation_gates(f) for f in load_variant_files()}


@pytest.mark.parametrize(("gpus", "generation"), [
    ([H100], "sm90"), ([GpuInfo(0, "NVIDIA A10", "8.6"), GpuInfo(1, "NVIDIA H100", "9.0")], "sm8x"),
    ([GB10], "sm12x"), ([B300], "sm10x"), ([GpuInfo(0, "Tesla T4", "7.5")], "all"),
])
def test_doctor_recommends_the_generation_of_the_oldest_gpu(gpus, generation) -> None:
    facts = make_facts(drv=driver(gpus=gpus), torch=conda_torch("2.13.0", "13.0"))
    advice = advise(facts, FILES, VERSIONS, ["my-channel"], gates=REAL_GATES)
    assert advice.generation == generation
    assert advice.build_string == f"cuda130_cp310abi3_torch213_{generation}_*"
    override = "" if generation == "all" else f"CONDA_OVERRIDE_CUDA_ARCH={gpus[0].compute_cap} "
    assert advice.install == [f'{override}conda install -c my-channel -c conda-forge '
                              f'"causal-conv1d=1.7.0=cuda130_cp310abi3_torch213_{generation}_*"']
    assert any(n.startswith(f"the {'all-architecture' if generation == 'all' else generation} build") for n in advice.notes)
    if generation != "all":
        assert advice.build[0].endswith(f"--generation {generation}")
    assert f"GPU generation {generation}" in render_text(facts, advice)


@pytest.mark.parametrize(("conda", "says", "override"), [
    pytest.param(CondaInfo("26.7.1", {"__cuda": "13.0", "__cuda_arch": "9.0"}), "conda 26.7.1 reports __cuda_arch=9.0",
                 "", id="the plugin: conda takes the generation by itself"),
    pytest.param(CondaInfo("26.7.1", {"__cuda": "13.0"}), "reports no __cuda_arch: it installs the all-architecture",
                 "CONDA_OVERRIDE_CUDA_ARCH=9.0 ", id="no plugin: the all build unless told"),
])
def test_doctor_says_whether_conda_reports_the_gpu(conda: CondaInfo, says: str, override: str) -> None:
    facts = replace(make_facts(torch=conda_torch("2.13.0", "13.0")), conda=conda)
    advice = advise(facts, FILES, VERSIONS, ["my-channel"], gates=REAL_GATES)
    assert advice.generation == "sm90"
    assert any(says in n for n in advice.notes), advice.notes
    assert "nvidia-virtual-packages" in " ".join(advice.notes) or not override
    assert advice.install == [f'{override}conda install -c my-channel -c conda-forge '
                              '"causal-conv1d=1.7.0=cuda130_cp310abi3_torch213_sm90_*"']


def test_conda_info_reads_what_conda_reports(tmp_path) -> None:
    """A stand-in `conda` on PATH answering `info --json` as conda 26.7.1 does; a broken one is no conda."""
    fake = tmp_path / "conda"
    fake.write_text('#!/bin/sh\necho \'{"conda_version": "26.7.1", "virtual_pkgs": [["__cuda", "13.0", "0"], '
                    '["__cuda_arch", "9.0", "0"], ["__glibc", "2.36", "0"]]}\'\n')
    fake.chmod(0o755)
    assert conda_info({"PATH": str(tmp_path)}) == CondaInfo("26.7.1", {"__cuda": "13.0", "__cuda_arch": "9.0",
                                                                         "__glibc": "2.36"})
    fake.write_text("#!/bin/sh\necho not json\n")
    assert conda_info({"PATH": str(tmp_path)}) is None
    assert conda_info({"PATH": str(tmp_path / "nowhere")}) is None


def test_pixi_lets_the_workspace_choose_the_generation() -> None:
    """pixi solves for the GPU the workspace declares: no pinned generation, a note on how to declare it."""
    facts = make_facts(torch=conda_torch("2.13.0", "13.0"), env=PIXI_ENV)
    advice = advise(facts, FILES, VERSIONS, ["my-channel"], gates=REAL_GATES)
    assert advice.generation == "sm90" and advice.install[-1] == 'pixi add "causal-conv1d=1.7.0=cuda130_cp310abi3_torch213_*"'
    assert any('arch = "9.0"' in n for n in advice.notes)


def test_no_generation_for_conda_forge_or_a_file_that_does_not_split() -> None:
    facts = make_facts(torch=conda_torch("2.13.0", "13.0"))
    assert advise(facts, FILES, VERSIONS, ["conda-forge"], gates=REAL_GATES).generation is None
    facts_129 = make_facts(torch=conda_torch("2.13.0", "12.9"), drv=driver(cuda="12.9"))
    assert advise(facts_129, FILES, VERSIONS, ["my-channel"], gates=REAL_GATES).generation == "all"


@pytest.mark.parametrize("env", [PIXI_ENV, EnvInfo("conda", "env", "/opt/env"), EnvInfo(None)])
def test_every_printed_channel_is_shell_quoted(env: EnvInfo) -> None:
    """A local channel with a space (or any shell syntax) stays one word when a printed command is pasted."""
    mamba = InstalledDist("2.3.2", conda_build="cuda130_cp310abi3_torch212_sm90_h0_0")
    advice = advise(make_facts(torch=conda_torch(), env=env, mamba=mamba), FILES, VERSIONS, ["/tmp/my out"])
    mismatch = [w.message.split("`")[-2] for w in advice.warnings if w.code == "ssm-torch-mismatch"]
    commands = [c for c in [*advice.install, *mismatch] if "/tmp/my" in c]
    assert len(commands) == 2 and all("/tmp/my out" in shlex.split(c) for c in commands), commands
