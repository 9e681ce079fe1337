"""The whole pipeline, for real, offline: stand-in channel -> build.py -> install -> import.

One marked test (run with --slow): builds the unchanged recipe for CUDA 13.0 / Python 3.11 /
torch 2.14 / sm_90 against the offline stand-in channel, with rattler-build's own solve, build
environments, source fetch, patches, build script, nvcc compile, linking checks, test section and
index, then installs the result with py-rattler into a fresh prefix and inspects it.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from scripts.channel import install_into_prefix
from scripts.common import REPO_ROOT, human_duration, human_size
from scripts.sources import cache_dir

CUDA, PYTHON, TORCH, ARCH = "13.0", "3.11", "2.14", "9.0"


def cuobjdump() -> str:
    for root in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]):
        for candidate in Path(root).glob("nvidia/cu*/bin/cuobjdump"):
            return str(candidate)
    pytest.fail("cuobjdump not found: pip install -r requirements-dev.txt (nvidia-cuda-cuobjdump)")


def run(*args: str, **kwargs) -> subprocess.CompletedProcess:
    print("$", " ".join(args), flush=True)
    return subprocess.run(args, check=True, text=True, **kwargs)


@pytest.fixture(scope="module")
def standin() -> Path:
    """The offline stand-in channel, built once and cached outside the clone."""
    channel = cache_dir() / "standin"
    run(sys.executable, str(REPO_ROOT / "scripts" / "offline_channel.py"), "--output", str(channel))
    return channel


@pytest.fixture(scope="module")
def built(standin):
    # A fixed place: ccache keys on paths relative to the build root, and rattler-build pads the
    # host prefix to a length that depends on the output directory's, so a stable output path lets
    # a second CI run reuse the compiled objects.
    output = cache_dir() / "e2e-output"
    shutil.rmtree(output, ignore_errors=True)
    start = time.monotonic()
    command = [sys.executable, str(REPO_ROOT / "scripts" / "build.py"), "--channel", standin.as_uri(),
               "--output-dir", str(output), "--cuda", CUDA, "--python", PYTHON, "--torch", TORCH, "--arch", ARCH]
    # Streamed, so a long compile shows its progress in the CI log; kept for the checks below.
    with subprocess.Popen(command, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as process:
        lines = []
        for line in process.stdout:
            print(line, end="", flush=True)
            lines.append(line)
    seconds = time.monotonic() - start
    assert process.returncode == 0, "build.py failed (log above)"
    (package,) = output.glob("*/causal-conv1d-*.conda")
    print(f"\nend-to-end build: {human_duration(seconds)}, package {human_size(package.stat().st_size)}")
    return output, package, "".join(lines)


@pytest.fixture(scope="module")
def unpacked(built, tmp_path_factory) -> Path:
    from rattler.package_streaming import extract

    destination = tmp_path_factory.mktemp("unpacked")
    extract(built[1], destination)
    return destination


@pytest.mark.slow
def test_end_to_end(standin, built, unpacked, tmp_path):
    output, package, log = built

    # The package: name, version, build string, run dependencies.
    index = json.loads((unpacked / "info" / "index.json").read_text())
    assert index["name"] == "causal-conv1d" and index["version"] == "1.7.0"
    assert re.fullmatch(r"cuda130_py311_torch214_h[0-9a-f]{7}_0", index["build"]), index["build"]
    depends = index["depends"]
    assert "pytorch 2.14.* cuda*" in depends, depends
    assert any(re.fullmatch(r"pytorch >=2\.14(\.\d+)*,<2\.15\.0a0", d) for d in depends), depends
    assert any(re.fullmatch(r"cuda-version >=13\.0,<14(\.0a0)?", d) for d in depends), depends
    # python_abi (python's run_export) is what pins Python X.Y, as on conda-forge.
    assert "python_abi 3.11.* *_cp311" in depends and "python" in depends, depends

    # The extension: sm_90 SASS and nothing else, no PTX.
    (extension,) = unpacked.glob("lib/python3.11/site-packages/causal_conv1d_cuda.cpython-311-*.so")
    elves = run(cuobjdump(), "--list-elf", str(extension), capture_output=True).stdout
    archs = set(re.findall(r"\.(sm_\w+)\.cubin", elves))
    assert archs == {"sm_90"}, elves
    ptx = subprocess.run([cuobjdump(), "--list-ptx", str(extension)], capture_output=True, text=True)
    assert ".ptx" not in ptx.stdout, ptx.stdout

    # RPATHs relative to the extension; nothing from the build machine leaked into the package.
    dynamic = run("readelf", "-d", str(extension), capture_output=True).stdout
    for rpath in re.findall(r"\((?:RPATH|RUNPATH)\)\s+Library (?:rpath|runpath): \[(.*)\]", dynamic):
        assert all(p.startswith("$ORIGIN") for p in rpath.split(":")), rpath
    # Installed text files must not name the build machine's paths (info/ records the build's own
    # directories by design); no file at all may name the compiler cache, which reaches the build
    # only as a secret.
    ccache_dir = str(cache_dir() / "ccache").encode()
    leaked = []
    for f in unpacked.rglob("*"):
        if not f.is_file():
            continue
        data = f.read_bytes()
        installed_text = f.parts[len(unpacked.parts)] != "info" and b"\0" not in data[:4096]
        if ccache_dir in data or (installed_text and (b"rattler-build_" in data or str(output).encode() in data)):
            leaked.append(str(f.relative_to(unpacked)))
    assert not leaked, leaked

    # The linking check ran with overlinking as an error, and passed.
    assert "Overlinking" not in log and "overlinking" not in log.lower().replace("overlinking_behavior", "")

    # Install from the output channel with py-rattler into a fresh prefix, as pixi would.
    prefix = tmp_path / "env"
    installed = install_into_prefix([output.as_uri(), standin.as_uri()], ["causal-conv1d"], prefix, cuda=CUDA)
    assert any(r.startswith(f"causal-conv1d=1.7.0={index['build']}") for r in installed), installed
    probe = run(str(prefix / "bin" / "python"), "-c",
                "import causal_conv1d, torch; print(causal_conv1d.__version__, torch.__version__)",
                capture_output=True, env={**os.environ, "PYTHONNOUSERSITE": "1"})
    assert probe.stdout.split()[0] == "1.7.0" and probe.stdout.split()[1].startswith("2.14"), probe.stdout
