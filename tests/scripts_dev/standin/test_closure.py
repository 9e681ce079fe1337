"""The stand-in's dependency closure: every Requires-Dist of every repacked wheel, on the target
Python and linux-64, names a package the stand-in holds, at a version that satisfies it (the solver
of `ssm-conda build` pulls the whole tree, e.g. transformers for mamba-ssm, from the channel alone)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version
from ssm_conda.console import UsageError
from ssm_conda_dev.standin import catalog, host, packages
from ssm_conda_dev.standin.command import wheel_cache
from ssm_conda_dev.standin.wheels import TargetPython, Wheel, applicable, find_wheel, read_metadata

from tests.standin_channel import TORCH

# the wheel folders SSM_CONDA_WHEEL_DIRS names (tests/standin_channel.py) and the stand-in's cache, newest wins
WHEEL_DIRS = [*(Path(d) for d in os.environ.get("SSM_CONDA_WHEEL_DIRS", "").split(os.pathsep) if d), wheel_cache()]


def unmet(wheels: dict[str, Wheel], versions: dict[str, str | None], target: TargetPython) -> list[str]:
    """What the repacked wheels require that the stand-in does not hold: a name outside `versions`
    ({conda name: version, None where any will do}), or a version outside the specifier."""
    python = Version(target.marker_environment()["python_full_version"])
    problems = []
    for conda, wheel in wheels.items():
        meta = read_metadata(wheel.path)
        if meta.requires_python and not meta.requires_python.contains(python, prereleases=True):
            problems.append(f"{conda} {wheel.version}: Requires-Python {meta.requires_python}")
        for req in applicable(meta.requires, target):
            name = catalog.CONDA_NAMES.get(canonicalize_name(req.name), canonicalize_name(req.name))
            if name not in versions:
                problems.append(f"{conda} {wheel.version} requires {req}: no {name} in the stand-in")
            elif versions[name] and not req.specifier.contains(Version(versions[name]), prereleases=True):
                problems.append(f"{conda} {wheel.version} requires {req}: the stand-in has {name} {versions[name]}")
    return problems


def test_fake_machine_closure_by_name(fake_machine):
    """Every run requirement of every stand-in names a stand-in (the fake wheels' versions are made up)."""
    names = catalog.all_names()
    for standin in packages.standins(fake_machine):
        for requirement in standin.run or ():
            name = requirement.split()[0]
            assert name in names or name.startswith("__"), (standin.key, requirement)  # __cuda: virtual


def test_unmet_reports_missing_names_and_versions(tmp_path, wheel_maker):
    target = TargetPython("3.11", "2.36")
    path = wheel_maker(tmp_path, "demo-1.0-py3-none-any.whl",
                       ("huggingface-hub>=2", "absent", 'tomli; python_version < "3.11"'), ">=3.12")
    problems = unmet({"demo": Wheel(path, "demo", "1.0")}, {"huggingface_hub": "1.5"}, target)
    assert problems == ["demo 1.0: Requires-Python >=3.12",
                        "demo 1.0 requires huggingface-hub>=2: the stand-in has huggingface_hub 1.5",
                        "demo 1.0 requires absent: no absent in the stand-in"]


@pytest.mark.parametrize("py_ver", ["3.10", "3.11", "3.12"])
def test_real_wheels_close_the_tree(py_ver, request):
    """With the wheels this machine has (the cache's and SSM_CONDA_WHEEL_DIRS', picked as `ssm-conda
    standin` picks them), the stand-in satisfies every requirement of every wheel it repacks:
    transformers, huggingface_hub, tokenizers, ... down to mdurl. With --slow the stand-in's build
    downloads them first (a cold CI would otherwise skip it); without, skipped where they are absent."""
    if request.config.getoption("--slow"):
        request.getfixturevalue("standin")
    target = TargetPython(py_ver, "2.36")
    # the torch the stand-in fixture repacks: a CUDA build of the newest minor in variants/
    torch = find_wheel(WHEEL_DIRS, "torch", f"=={TORCH}.*", target, accept=lambda w: not host.is_cpu_build(w.version))
    if torch is None:
        pytest.skip(f"no torch {TORCH} wheel for {target.tag} in {', '.join(map(str, WHEEL_DIRS))}")
    companions = host.torch_companions("wheel", torch.path, target)
    try:
        wheels = host.gather(host.wanted_wheels(companions, py_ver),
                             host.WheelSource(tuple(WHEEL_DIRS), wheel_cache(), offline=True), target)
    except UsageError as exc:
        pytest.skip(str(exc))
    repacked = {conda: wheel for conda, wheel in wheels.items() if conda not in catalog.TOOL_WHEELS}
    versions: dict[str, str | None] = {name: None for name in catalog.all_names()}
    versions.update({conda: wheel.version for conda, wheel in wheels.items()},
                    python=f"{py_ver}.0", pytorch=Version(torch.version).public)
    assert "huggingface_hub" in repacked  # transformers >=5.25 requires Python 3.11 (PYTHON_FLOORS)
    assert ("transformers" in repacked) is (Version(py_ver) >= Version(catalog.PYTHON_FLOORS["transformers"]))
    assert unmet(repacked, versions, target) == []
