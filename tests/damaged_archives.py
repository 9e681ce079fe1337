"""Small real packages named as recipe/ names them, and damaged copies of them, for every test that hands
archives to a command (upload's pre-check, gpu-test, ...).

A damage is a function of a good package lying in a channel (CHANNEL/SUBDIR/FILE): it damages the file in
place, or puts the bad file beside it, and returns the path the command will find. DAMAGES names them all.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from rattler_build import assemble_package
from ssm_conda.matrix import plan
from ssm_conda.selection import Selection

# conda-forge's names the issue saw uploaded from the stand-in channel, and another project's package
FOREIGN_NAMES = ("python", "libgcc", "cuda-nvcc_linux-64", "numpy")


def rendered_name(cuda: str = "13.0", python: str = "3.12", torch: str = "2.13", generation: str = "all",
                  package: str = "causal-conv1d", platform: str = "linux-64") -> tuple[str, str, str]:
    """(name, version, build string) of one variant of a recipe, as rattler-build renders it."""
    selection = Selection(cuda=cuda, python=python, torch=torch, generations=(generation,), packages=(package,))
    (variant,) = plan(selection, target_platform=platform)
    return variant.package, str(variant.rendered.recipe.package.version), variant.build_string


def build_package(out: Path, name: str, version: str, build: str, subdir: str = "linux-64", noarch: str | None = None,
                  text: str = "") -> Path:
    """A real package made by rattler-build's assembler into `out`: share/NAME/id.txt, no dependencies.
    `text` goes into the file: another text is another build (another sha256) under the same name."""
    with tempfile.TemporaryDirectory() as files:
        (Path(files) / "share" / name).mkdir(parents=True)
        (Path(files) / "share" / name / "id.txt").write_text(f"{name} {version} {build} {subdir} {text}\n")
        out.mkdir(parents=True, exist_ok=True)
        return Path(assemble_package(name, version, subdir, build, out, files_dir=files, noarch=noarch).path)


def good_package(channel: Path, *variant: str, subdir: str = "linux-64", text: str = "") -> Path:
    """A package of ours (rendered_name(*variant)) in CHANNEL/SUBDIR."""
    return build_package(channel / subdir, *rendered_name(*variant, platform=subdir), subdir=subdir, text=text)


def parts(package: Path) -> tuple[str, str, str]:
    name, version, build = package.name.removesuffix(".conda").rsplit("-", 2)
    return name, version, build


def _rewritten(package: Path, drop: str = "", garble: str = "") -> Path:
    """The .conda zip again, less the members starting with `drop`, and those starting with `garble`
    replaced by as many random bytes (with a valid CRC: zipfile computes it)."""
    with zipfile.ZipFile(package) as old:
        members = [(info, old.read(info)) for info in old.infolist() if not (drop and info.filename.startswith(drop))]
    with zipfile.ZipFile(package, "w") as new:
        for info, data in members:
            garbled = garble and info.filename.startswith(garble)
            new.writestr(info, random.Random(info.filename).randbytes(len(data)) if garbled else data)
    return package


def _replaced(package: Path, name: str, subdir: str, noarch: str | None = None) -> Path:
    """The file replaced by a real package of this version and build whose index.json says `name` and `subdir`."""
    with tempfile.TemporaryDirectory() as out:
        shutil.copyfile(build_package(Path(out), name, *parts(package)[1:], subdir=subdir, noarch=noarch), package)
    return package


def truncated(package: Path) -> Path:
    package.write_bytes(package.read_bytes()[: package.stat().st_size // 2])
    return package


def random_bytes(package: Path) -> Path:
    package.write_bytes(random.Random(package.name).randbytes(package.stat().st_size))
    return package


def empty(package: Path) -> Path:
    package.write_bytes(b"")
    return package


def zip_of_junk(package: Path) -> Path:
    with zipfile.ZipFile(package, "w") as junk:
        junk.writestr("junk.txt", "not a conda package\n")
    return package


def no_pkg_member(package: Path) -> Path:
    return _rewritten(package, drop="pkg-")


def no_info_member(package: Path) -> Path:
    return _rewritten(package, drop="info-")


def garbage_pkg_member(package: Path) -> Path:
    return _rewritten(package, garble="pkg-")


def index_lies_about_name(package: Path) -> Path:
    return _replaced(package, "numpy", package.parent.name)


def index_lies_about_subdir(package: Path) -> Path:
    return _replaced(package, parts(package)[0], "linux-aarch64" if package.parent.name == "linux-64" else "linux-64")


def noarch_in_platform_folder(package: Path) -> Path:
    """index.json says noarch: generic, and the subdir of the folder it lies in."""
    return _replaced(package, parts(package)[0], package.parent.name, noarch="generic")


def symlink_out_of_the_folder(package: Path) -> Path:
    """The file moved beside the channel, a symbolic link to it in its place."""
    outside = package.parents[2] / "elsewhere" / package.name
    outside.parent.mkdir(exist_ok=True)
    package.rename(outside)
    package.symlink_to(outside)
    return package


def foreign_package(package: Path, name: str = "numpy") -> Path:
    """A real small package of another name beside ours (the good one is left as it is)."""
    return build_package(package.parent, name, "2.0.0", "py312_0", subdir=package.parent.name)


DAMAGES: dict[str, Callable[[Path], Path]] = {
    f.__name__.replace("_", " "): f
    for f in (truncated, random_bytes, empty, zip_of_junk, no_pkg_member, no_info_member, garbage_pkg_member,
              index_lies_about_name, index_lies_about_subdir, noarch_in_platform_folder, symlink_out_of_the_folder,
              foreign_package)
}
