"""ssm_conda.channels: a local channel that conda and py-rattler can install from, and that a web server can serve."""

import io
import json
import os
import re
import shutil
import stat
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
import rattler.package_streaming
import zstandard
from rattler import Subdir
from rattler_build import ArchiveType, assemble_package
from ssm_conda import channels
from ssm_conda.channels import channel_repodata, check_archive, index_channel, name_and_build_of, normalise_channel, writable_dir
from ssm_conda.console import PipelineError, UsageError

from tests.bad_input import read_only
from tests.bad_input.gpu_check import tiny_package
from tests.damaged_archives import HOSTILE, good_package, rendered_name


def test_index_creates_repodata_for_native_and_noarch(tmp_path):
    index_channel(tmp_path)
    for subdir in (str(Subdir.current()), "noarch"):
        repodata = json.loads((tmp_path / subdir / "repodata.json").read_text())
        assert repodata["info"]["subdir"] == subdir
        assert repodata["packages.conda"] == {}


def test_index_lists_the_packages_of_every_platform_folder(tmp_path):
    """A cross build's channel (linux-aarch64 packages, built elsewhere and moved in) is installable: its folder is
    indexed beside this machine's and noarch; a folder that names no platform (build-logs/) is left alone."""
    from rattler_build import PlatformConfig, RenderConfig, Stage0Recipe, ToolConfiguration, VariantConfig

    recipe = "package: {name: causal-conv1d, version: '1.7.0'}\nbuild: {script: [mkdir -p $PREFIX/share]}\n"
    render = RenderConfig(PlatformConfig(target_platform="linux-aarch64"))
    (rendered,) = Stage0Recipe.from_yaml(recipe, recipe_dir=tmp_path / "recipe").render(VariantConfig(), render)
    (built,) = rendered.run_build(ToolConfiguration(test_strategy="skip"), output_dir=str(tmp_path / "build"),
                                  channels=[(tmp_path / "build").as_uri()]).packages
    channel = tmp_path / "channel"
    (channel / "linux-aarch64").mkdir(parents=True)
    (channel / "build-logs").mkdir()
    Path(built).rename(channel / "linux-aarch64" / Path(built).name)
    index_channel(channel)
    repodata = json.loads((channel / "linux-aarch64" / "repodata.json").read_text())
    assert list(repodata["packages.conda"]) == [Path(built).name]
    assert {p.parent.name for p in channel.glob("*/repodata.json")} == {"linux-aarch64", str(Subdir.current()), "noarch"}
    assert list((channel / "build-logs").iterdir()) == []


def modes(channel):
    return {str(p.relative_to(channel)): stat.S_IMODE(p.lstat().st_mode) for p in channel.rglob("*")
            if p.relative_to(channel).parts[0] in ("noarch", "linux-64", "linux-aarch64", "build-logs")}


def test_the_indexed_channel_is_servable_whatever_the_umask(tmp_path):
    """rattler-build writes each package 0600 (a web server or another account got "permission denied"):
    after the index, files are 0644 and folders 0755, as conda-index writes them, the build logs' too; a folder of
    the user's that names no platform is left as it is."""
    package = tiny_package(tmp_path / "out")
    for folder in ("build-logs", "my-notes"):
        (tmp_path / "out" / folder).mkdir(mode=0o700)
        (tmp_path / "out" / folder / "a.log").write_text("")
        (tmp_path / "out" / folder / "a.log").chmod(0o600)
    assert stat.S_IMODE(package.stat().st_mode) == 0o600
    (tmp_path / "out" / "linux-aarch64").mkdir(mode=0o700)  # a subdir the index does not write, made by hand
    (tmp_path / "out" / "linux-aarch64" / "repodata.json").write_text("{}")
    outside = tmp_path / "elsewhere.conda"
    outside.write_bytes(b"")
    outside.chmod(0o600)
    (tmp_path / "out" / "noarch" / "linked-1.0-0.conda").symlink_to(outside)
    umask = os.umask(0o077)
    try:
        index_channel(tmp_path / "out")
    finally:
        os.umask(umask)
    found = modes(tmp_path / "out")
    assert found.pop("noarch/linked-1.0-0.conda") == 0o777  # the link itself: what it points to is not the channel's
    assert stat.S_IMODE(outside.stat().st_mode) == 0o600
    assert {p for p, mode in found.items() if mode != (0o755 if (tmp_path / "out" / p).is_dir() else 0o644)} == set()
    assert {f"noarch/{package.name}", "noarch/repodata.json", "linux-64/repodata.json", "linux-aarch64",
            "build-logs/a.log"} <= found.keys()
    assert stat.S_IMODE((tmp_path / "out" / "my-notes").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "out" / "my-notes" / "a.log").stat().st_mode) == 0o600


def test_a_folder_to_write_in_is_checked_and_not_created(tmp_path):
    (tmp_path / "file").write_text("")
    assert writable_dir(tmp_path / "new" / "folder", "--output-dir") == tmp_path / "new" / "folder"
    assert not (tmp_path / "new").exists()
    with pytest.raises(UsageError, match=f"^--log-dir={tmp_path}/file/logs: {tmp_path}/file is not a directory$"):
        writable_dir(tmp_path / "file" / "logs", "--log-dir")
    (tmp_path / "ro").mkdir()
    with read_only(tmp_path / "ro"):
        for path in (tmp_path / "ro", tmp_path / "ro" / "new"):
            with pytest.raises(UsageError, match=f"^X={path}: {tmp_path}/ro is not writable"):
                writable_dir(path, "X")


def test_every_channel_must_answer_for_a_subdir(tmp_path):
    tiny_package(tmp_path / "channel")
    index_channel(tmp_path / "channel")
    good, folder = (tmp_path / "channel").as_uri(), (tmp_path / "folder")
    assert [r.subdir for r in channel_repodata([good], ["linux-aarch64", "noarch"])] == ["noarch"]
    folder.mkdir()
    with pytest.raises(UsageError, match=f"^channel {folder.as_uri()} is not a conda channel: it has no repodata.json for "
                                         "linux-64, noarch$"):
        channel_repodata([good, folder.as_uri()], ["linux-64", "noarch"])
    with pytest.raises(PipelineError, match=r"^cannot read the repodata of http://127.0.0.1:9/ \(linux-64\): .*refused"):
        channel_repodata(["http://127.0.0.1:9/"], ["linux-64", "noarch"])


def test_name_and_build_of_a_file_name():
    assert name_and_build_of("mamba-ssm-2.3.2.post1-cuda130_py312_torch213_all_habc_0.conda") == \
        ("mamba-ssm", "cuda130_py312_torch213_all_habc_0")
    assert name_and_build_of("cuda-cudart-dev-13.0.96-h0_1.tar.bz2") == ("cuda-cudart-dev", "h0_1")


def test_channel_forms(tmp_path):
    assert normalise_channel("conda-forge") == "conda-forge"
    assert normalise_channel("https://prefix.dev/my-channel") == "https://prefix.dev/my-channel"
    assert normalise_channel(str(tmp_path)) == tmp_path.resolve().as_uri()
    assert normalise_channel(tmp_path.as_uri()) == tmp_path.as_uri()
    with pytest.raises(UsageError):
        normalise_channel("not a channel")


# ---- check_archive: the tar headers, read before anything is unpacked (issue 41)

MEMBER_ERRORS = {  # a damage of tests/damaged_archives.py -> check_archive's one line
    "symlink to /etc": "member lib/etc links to /etc, upwards or outside the package",
    "symlink to ../../x": "member lib/up links to ../../x, upwards or outside the package",
    "symlink upwards": "member lib/d/u links to .., upwards or outside the package",
    "member named ../x": "member ../x lies outside the package",
    "member named /abs": "member /abs lies outside the package",
    "hardlink out": "member lib/hard links to ../../etc/passwd, upwards or outside the package",
    "fifo": "member lib/fifo is a device or fifo (a package holds only files, folders and links)",
    "zip bomb": "unpacks to over 512 MiB (at member lib/zeros): a zip bomb?",
}


@pytest.fixture(scope="module")
def ours(tmp_path_factory) -> Path:
    return good_package(tmp_path_factory.mktemp("ours"))


@pytest.fixture
def no_extraction(monkeypatch) -> None:
    def extract(*args: object) -> None:
        raise AssertionError(f"unpacked: {args}")

    monkeypatch.setattr(rattler.package_streaming, "extract", extract)


@pytest.mark.parametrize("damage", sorted(MEMBER_ERRORS))
def test_a_hostile_member_is_refused_before_anything_is_unpacked(damage, ours, tmp_path, no_extraction):
    victim = HOSTILE[damage](Path(shutil.copy2(ours, tmp_path / ours.name)))
    start = time.monotonic()
    with pytest.raises(ValueError) as refused:
        check_archive(victim, tmp_path / "unpacked")
    assert str(refused.value) == MEMBER_ERRORS[damage]
    assert not (tmp_path / "unpacked").exists() and time.monotonic() - start < 5  # the bomb's gigabyte is never read


@pytest.mark.parametrize("listed", ["../../etc/passwd", "/etc/hostname"])
def test_paths_json_may_list_only_paths_inside_the_prefix(listed, ours, tmp_path):
    """Before, Path(unpacked, entry) followed them: /etc/hostname was found, hashed and compared."""
    victim = HOSTILE[f"paths.json lists {listed}"](Path(shutil.copy2(ours, tmp_path / ours.name)))
    with pytest.raises(ValueError) as refused:
        check_archive(victim)
    assert str(refused.value) == (f"{listed} lies outside the prefix (info/paths.json may list only relative paths "
                                  "without ..) (damaged archive)")


def test_links_down_from_their_folder_pass(tmp_path):
    """A link to a sibling or below it passes; one up a folder does not, though it stays inside by itself (a chain of
    such links can climb out)."""
    site = tmp_path / "files" / "lib" / "python3.12" / "site-packages" / "causal_conv1d"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("")
    (site / "alias.py").symlink_to("__init__.py")
    (site.parent / "down.py").symlink_to("causal_conv1d/__init__.py")
    name, version, build = rendered_name()
    out = assemble_package(name, version, "linux-64", build, tmp_path, files_dir=tmp_path / "files")
    assert check_archive(Path(out.path)).name.normalized == name
    (site.parent / "up.py").symlink_to("../site-packages/causal_conv1d/__init__.py")
    out = assemble_package(name, version, "linux-64", build, tmp_path / "up", files_dir=tmp_path / "files")
    with pytest.raises(ValueError, match="up.py links to ../site-packages/causal_conv1d/__init__.py, upwards or outside"):
        check_archive(Path(out.path))


def test_the_cap_counts_every_member_of_both_tars(ours, monkeypatch):
    with zipfile.ZipFile(ours) as conda:  # the unpacked size: every member of the info and pkg tars
        total = sum(m.size for name in conda.namelist() if name.endswith(".tar.zst")
                    for m in tarfile.open(fileobj=zstandard.ZstdDecompressor().stream_reader(conda.read(name)), mode="r|"))
    monkeypatch.setattr(channels, "MAX_UNPACKED_BYTES", total)
    check_archive(ours)
    monkeypatch.setattr(channels, "MAX_UNPACKED_BYTES", total - 1)
    with pytest.raises(ValueError, match=r"^unpacks to over 0 MiB \(at member "):
        check_archive(ours)


def test_the_cap_holds_our_largest_package_many_times():
    """mamba-ssm's sm90 package unpacks to 23 MiB, the all-architecture one to about 42 MiB; 1 GiB would be a bomb."""
    assert 10 * 42 << 20 < channels.MAX_UNPACKED_BYTES < 1 << 30


@pytest.mark.parametrize(("member", "message"), [
    ("../x", "member ../x lies outside the package"),
    ("lib/link", "member lib/link links to /etc/passwd, upwards or outside the package")])
def test_a_tar_bz2_is_read_the_same_way(member, message, tmp_path, no_extraction):
    (tmp_path / "files" / "lib").mkdir(parents=True)
    (tmp_path / "files" / "lib" / "a.txt").write_text("a\n")
    name, version, build = rendered_name()
    path = Path(assemble_package(name, version, "linux-64", build, tmp_path, files_dir=tmp_path / "files",
                                 archive_type=ArchiveType.TarBz2).path)
    with tarfile.open(path) as old:
        members = [(m, old.extractfile(m).read() if m.isfile() else None) for m in old.getmembers()]
    header = tarfile.TarInfo(member)
    if member == "lib/link":
        header.type, header.linkname = tarfile.SYMTYPE, "/etc/passwd"
    else:
        header.size = 1
    with tarfile.open(path, "w:bz2") as new:
        for m, data in [*members, (header, b"x" if header.isfile() else None)]:
            new.addfile(m, io.BytesIO(data) if data is not None else None)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        check_archive(path)
