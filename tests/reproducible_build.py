"""A tiny real package built as `ssm-conda build` builds (reproducible.build_root and build_in), from a tiny checkout of
its own, for the tests of the reproducible archive and of `ssm-conda verify`."""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import zstandard
from ssm_conda.channels import index_channel
from ssm_conda.matrix import load_variant_files, plan
from ssm_conda.reproducible import EPOCH_FILE, build_in, build_root
from ssm_conda.selection import Selection

EPOCH = 1_700_000_000  # 2023-11-14T22:13:20Z
MODULE = "site-packages/causal_conv1d"  # where causal-conv1d's files may lie (ssm_conda.contents): version-independent
VARIANTS = """\
cuda_compiler_version: ["13.0"]
python: ["3.10"]
pytorch: ["2.13"]
gpu_generation: ["all"]
cuda_arch_list: ["9.0+PTX"]
cuda_arch_supported: ["9.0"]
nvcc_lineinfo: ["0"]
"""
RECIPE = """\
schema_version: 1
package: {name: causal-conv1d, version: "1.7.0"}
build:
  number: 0
  string: cuda${{ cuda_compiler_version | replace('.', '') }}_cp${{ python | version_to_buildstring }}abi3\
_torch${{ pytorch | replace('.', '') }}_${{ gpu_generation }}_h${{ hash }}_${{ build_number }}
  python:
    version_independent: true
  script:
    file: build.sh
    env:
      TORCH_CUDA_ARCH_LIST: ${{ cuda_arch_list }}
      NVCC_LINEINFO: ${{ nvcc_lineinfo }}
"""


def tiny_checkout(folder: Path, extra: str = ":", epoch: int = EPOCH) -> Path:
    """A checkout whose one recipe, causal-conv1d, builds in seconds (no compiler, no dependency): its build script
    writes the source's time as recipe/shared/build-extension.sh does and a module, then runs `extra`."""
    recipe = folder / "recipe" / "causal-conv1d"
    recipe.mkdir(parents=True)
    (folder / "variants").mkdir()
    (folder / "variants" / "tiny.yaml").write_text(VARIANTS)
    (recipe / "recipe.yaml").write_text(RECIPE)
    (recipe / "build.sh").write_text(f'echo {epoch} > "$(dirname "$SRC_DIR")/{EPOCH_FILE}"\nmkdir -p "$PREFIX/{MODULE}"\n'
                                     f'echo "ARCHS = \'$TORCH_CUDA_ARCH_LIST\'" > "$PREFIX/{MODULE}/__init__.py"\n{extra}\n')
    return folder


def empty_channel(folder: Path) -> Path:
    """An indexed local channel with no package: what the tiny recipe's builds solve from (they need nothing)."""
    folder.mkdir(parents=True, exist_ok=True)
    index_channel(folder)
    return folder


def build_tiny(root: Path, out: Path, checkout: Path | None = None, extra: str = ":") -> Path:
    """causal-conv1d of `checkout` (default: root's sibling checkout/, made tiny with `extra` if missing) built in the
    build root `root` into the channel `out`, solved from root's sibling empty-channel/."""
    from rattler_build import ToolConfiguration

    if checkout is None and not (checkout := root.parent / "checkout").is_dir():
        tiny_checkout(checkout, extra)
    channel = empty_channel(root.parent / "empty-channel")
    (variant,) = plan(Selection(packages=("causal-conv1d",)), files=load_variant_files(checkout / "variants"),
                      recipes=[checkout / "recipe" / "causal-conv1d" / "recipe.yaml"])
    out.mkdir(parents=True, exist_ok=True)
    with build_root(root):
        return build_in(root, variant.rendered, out, tool_config=ToolConfiguration(test_strategy="skip", keep_build=True),
                        channels=[channel.as_uri()])


def with_member(package: Path, member: str, change: Callable[[bytes], bytes], into: Path) -> Path:
    """A copy of `package` in `into` (same file name) whose info archive's `member` is `change`d: a crafted package."""
    into.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(package) as old, zipfile.ZipFile(into / package.name, "w") as new:
        for name in old.namelist():
            data = old.read(name)
            if name.startswith("info-"):
                out = io.BytesIO()
                with (tarfile.open(fileobj=zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)), mode="r|") as tar,
                      tarfile.open(fileobj=out, mode="w") as crafted):
                    for entry in tar:
                        content = tar.extractfile(entry).read() if entry.isfile() else None
                        if entry.name == member:
                            content = change(content)
                            entry.size = len(content)
                        crafted.addfile(entry, io.BytesIO(content) if content is not None else None)
                data = zstandard.ZstdCompressor().compress(out.getvalue())
            new.writestr(name, data)
    return into / package.name
