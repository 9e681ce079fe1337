"""The packages chosen for upload and the all-or-nothing pre-check, on small real packages and the damaged
copies of tests/damaged_archives.py: each through a dry run and a live upload against the fake server."""

from __future__ import annotations

import io
import os
import re
import shutil
import tarfile
import tempfile
import time
from pathlib import Path

import pytest
from rattler_build import ArchiveType, assemble_package
from ssm_conda.channels import check_archive
from ssm_conda.matrix import choose_built
from ssm_conda.selection import Selection
from ssm_conda.upload import archives

from tests.bad_input.upload import DAMAGE_ERRORS
from tests.damaged_archives import (
    DAMAGES,
    FOREIGN_NAMES,
    build_package,
    empty,
    foreign_package,
    parts,
    rendered_name,
    rendered_variant,
    windows_package,
)

ENV = {"PREFIX_API_KEY": "pfx-secret-123"}


def test_selectors_match_the_build_string(channel):
    """Packages named as the recipes name them today (the GPU generation in the build string): the
    selectors choose what rattler-build renders for them. Before, a regex without the generation
    matched no package, and --cuda/--python/--torch uploaded nothing."""
    packages = archives.select_packages(channel, Selection())
    for pkg in packages:
        archives.check_package(pkg, {})

    def names(**kw):
        return sorted(p.variant for p in choose_built(packages, lambda p: p.name_and_build, Selection(**kw)))

    everything = ["cuda129_cp310abi3_torch213_all", "cuda130_cp310abi3_torch212_sm90", "cuda130_cp310abi3_torch213_all"]
    assert names() == everything
    assert names(cuda="13.0") == everything[1:]
    assert names(cuda="13.0", python="3.10") == everything[1:]
    assert names(torch="2.12") == ["cuda130_cp310abi3_torch212_sm90"]
    assert names(python="3.12") == []  # an override: a package for 3.12 and later, which none of these is


def test_no_match_is_an_error(upload_cli, capsys, channel):
    assert upload_cli(["prefix", "--to", "c", "--python", "3.12", "--output-dir", str(channel)]) == 2
    assert "no package in" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["missing", "a file"])
def test_an_output_dir_that_is_not_a_directory(kind, upload_cli, capsys, tmp_path):
    """Before, a file given as --output-dir was said not to exist."""
    if kind == "a file":
        (tmp_path / "nope").write_text("")
    assert upload_cli(["prefix", "--to", "c", "--output-dir", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err == (f"error: output channel {tmp_path / 'nope'} is not a directory (build first, "
                                       "or pass --output-dir)\n")


def test_every_damage_has_its_expectation():
    assert sorted(DAMAGE_ERRORS) == sorted(DAMAGES)


@pytest.mark.parametrize("live", [False, True], ids=["dry-run", "live"])
@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_archive_stops_everything(damage, live, upload_cli, fake_server, capsys, channel, built):
    """Before, only a zip CRC test and index.json were read: a .conda without its pkg member, or with
    random bytes of a valid CRC in it, was uploaded and indexed, and failed at install."""
    server = fake_server()
    DAMAGES[damage](channel / "linux-64" / built[1].name)  # the second of three in upload order
    args = ["prefix", "--to", "c", "--output-dir", str(channel), *([] if live else ["--dry-run"])]
    status = upload_cli(args, ENV)
    out, err = capsys.readouterr()
    expected_status, message = DAMAGE_ERRORS[damage]  # the fault-injection table's rows
    assert (status, len(err.strip().splitlines())) == (expected_status, 1), err
    assert message in err and "Traceback" not in out + err, err
    assert server.calls == [] and server.probes == [] and server.urls == []
    if expected_status == 1:
        assert "nothing was uploaded" in err and "invalid" in out and "not attempted" in out


@pytest.mark.parametrize("name", FOREIGN_NAMES)
def test_packages_not_built_here_are_refused(name, upload_cli, fake_server, capsys, channel, built):
    """The stand-in channel as --output-dir listed 61 packages, python and libgcc among them: on a
    channel prepended with strict priority they would shadow conda-forge's for every user."""
    server = fake_server()
    foreign = foreign_package(channel / "linux-64" / built[0].name, name)
    assert upload_cli(["prefix", "--to", "c", "--output-dir", str(channel)], ENV) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"error: linux-64/{foreign.name}: {name} is not built by recipe/ (only causal-conv1d, "
                           f"mamba-ssm are published); move it out of {channel}")
    assert server.calls == [] and server.probes == [] and server.urls == []


@pytest.mark.parametrize(
    ("subdir", "variant", "version"),
    [("noarch", ("13.0", "3.10", "2.13", "all"), None),  # ours lie in a platform's subdir, noarch: python or not
     ("linux-64", ("13.0", "3.10", "2.13", "all"), "1.6.0"),  # a version the recipe no longer builds
     ("linux-64", ("13.0", "3.12", "2.13", "all"), None),  # --python 3.12: an override, not a variant of variants/
     ("osx-arm64", ("13.0", "3.10", "2.13", "all"), None)],
)
def test_builds_variants_does_not_render_are_refused(subdir, variant, version, upload_cli, fake_server, capsys, channel):
    server = fake_server()
    name, rendered_version, build = rendered_name(*variant)
    bad = build_package(channel / subdir, name, version or rendered_version, build, subdir=subdir)
    assert upload_cli(["prefix", "--to", "c", "--dry-run", "--output-dir", str(channel)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"error: {subdir}/{bad.name}: not a build variants/ renders for {subdir} (an --arch build, "
                           f"or a variant or version no longer listed); move it out of {channel}")
    assert server.urls == []


def test_an_arch_build_is_refused(upload_cli, capsys, channel):
    """`build --arch native` (or a list) names its package `_native_`/`_custom_`: fine to install from
    ./output, but not one CI publishes, and on the channel it would compete with the generations' builds."""
    name, version, build = rendered_name()
    build_package(channel / "linux-64", name, version, build.replace("_all_", "_custom_"))
    assert upload_cli(["prefix", "--to", "c", "--dry-run", "--output-dir", str(channel)]) == 2
    assert "_custom_h" in capsys.readouterr().err


def test_a_link_inside_the_folder_is_uploaded_once(upload_cli, fake_server, capsys, channel, built):
    """Only a link out of the folder is refused; one to a file of the channel is that file."""
    (channel / "noarch" / "link.conda").symlink_to(channel / "linux-64" / built[0].name)
    assert upload_cli(["prefix", "--to", "c", "--dry-run", "--output-dir", str(channel)]) == 0
    assert "dry run: 3 package(s)" in capsys.readouterr().out


def test_a_windows_package_is_sent_with_the_rest(upload_cli, capsys, channel, tmp_path):
    """win-64's causal-conv1d (site-packages, a .pyd, vs2022's run exports) passes the pre-check as the CI's Windows
    jobs build it; mamba-ssm has no win-64 variant, so one is refused."""
    package = windows_package(tmp_path, rendered_variant("13.0", "3.10", "2.13", "sm90", platform="win-64"))
    (channel / "win-64").mkdir()
    shutil.copy2(package, channel / "win-64")
    assert upload_cli(["prefix", "--to", "c", "--dry-run", "--output-dir", str(channel)]) == 0
    assert "https://prefix.dev/c/win-64/causal-conv1d-1.7.0-cuda130_cp310abi3_torch213_sm90_h" in capsys.readouterr().out
    shutil.copy2(package, channel / "win-64" / package.name.replace("causal-conv1d-1.7.0", "mamba-ssm-2.3.2.post1"))
    assert upload_cli(["prefix", "--to", "c", "--dry-run", "--output-dir", str(channel)]) == 2
    assert "mamba-ssm-2.3.2.post1-cuda130_cp310abi3_torch213_sm90" in capsys.readouterr().err


def test_precheck_rejects_renamed_and_misplaced_files(channel, built):
    variant = archives.refuse_foreign(channel / "linux-64" / built[0].name, channel, None)
    renamed = channel / "linux-64" / built[0].name.replace("-1.7.0-", "-9.9.9-")
    shutil.copy2(built[0], renamed)
    pkg = archives.LocalPackage(renamed, "linux-64", variant, size=renamed.stat().st_size)
    archives.check_package(pkg, {})
    assert "does not match its index.json" in pkg.problem

    misplaced = channel / "noarch" / built[0].name
    shutil.copy2(built[0], misplaced)
    pkg = archives.LocalPackage(misplaced, "noarch", variant, size=misplaced.stat().st_size)
    archives.check_package(pkg, {})
    assert "index.json says subdir linux-64" in pkg.problem

    pkg = archives.LocalPackage(channel / "linux-64" / built[0].name, "linux-64", variant, size=built[0].stat().st_size)
    archives.check_package(pkg, {built[0].name: "0" * 64})
    assert "sha256 differs" in pkg.problem


def test_each_package_is_held_to_its_own_variant(channel, built):
    """Upload pairs each file with the variant its name renders (name and build string): held to another variant, a
    package is refused for its name (another torch pin, another build string)."""
    packages = archives.select_packages(channel, Selection())
    assert sorted((p.filename, p.rendered.build_string) for p in packages) == sorted((p.name, parts(p)[2]) for p in built)
    other = next(p for p in packages if p.rendered.torch != "2.13")
    other.rendered = next(p for p in packages if p.rendered.torch == "2.13").rendered
    archives.check_package(other, {})
    assert re.fullmatch(r"index\.json says causal-conv1d-1\.7\.0-cuda130_cp310abi3_torch212_sm90_h\w+_0, variants/ renders "
                        r"causal-conv1d-1\.7\.0-cuda1\d+_cp310abi3_torch213_all_h\w+_0", other.problem)


def test_the_unpacked_copies_are_removed(channel, built, tmp_path, monkeypatch):
    """check_contents reads each package unpacked: into a temporary folder, gone after the check, valid or not."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    DAMAGES["foreign bin/python3.11"](channel / "linux-64" / built[0].name)
    invalid = archives.check_all(archives.select_packages(channel, Selection()), channel)
    assert [p.problem.split()[0] for p in invalid] == ["bin/python3.11"]
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize(
    ("content", "problem"),
    [(b"bbbb\n", "share/x/a.txt has another sha256 than info/paths.json lists"),
     (b"aaaaaaaa\n", "share/x/a.txt has 9 bytes, info/paths.json says 5")],
)
def test_a_payload_file_unlike_its_paths_json_entry_is_invalid(content, problem, tmp_path):
    """An archive sound in itself whose file differs from its info/paths.json entry (as a hand-edited
    archive or a bad disk leaves it; .tar.bz2 here, whose tar is easy to rewrite) is invalid."""
    (tmp_path / "files" / "share" / "x").mkdir(parents=True)
    (tmp_path / "files" / "share" / "x" / "a.txt").write_text("aaaa\n")
    name, version, build = rendered_name()
    path = Path(assemble_package(name, version, "linux-64", build, tmp_path, files_dir=tmp_path / "files",
                                 archive_type=ArchiveType.TarBz2).path)
    assert check_archive(path).name.normalized == name
    with tarfile.open(path) as old:
        members = [(m, old.extractfile(m).read() if m.isfile() else None) for m in old.getmembers()]
    with tarfile.open(path, "w:bz2") as new:
        for member, data in members:
            if member.name == "share/x/a.txt":
                data, member.size = content, len(content)
            new.addfile(member, io.BytesIO(data) if data is not None else None)
    with pytest.raises(ValueError, match=re.escape(f"{problem} (damaged archive)")):
        check_archive(path)


def test_one_bad_archive_names_the_count(channel, built, upload_cli, capsys):
    for pkg in built[:2]:
        empty(channel / "linux-64" / pkg.name)
    packages = archives.select_packages(channel, Selection())
    invalid = archives.check_all(packages, channel)
    first, second = sorted(p.name for p in built[:2])
    assert [p.filename for p in invalid] == [first, second]
    assert upload_cli(["prefix", "--to", "c", "--output-dir", str(channel)]) == 1
    assert capsys.readouterr().err.strip() == (
        f"error: linux-64/{first}: empty file (and 1 more invalid); nothing was uploaded"
    )


def test_the_check_is_quick_for_a_20_mb_package(tmp_path):
    """Every file is unpacked and hashed: a package of the size of ours (20 MB, 80 MB unpacked) takes well
    under a second here; the bound leaves room for a slow CI machine."""
    lib = tmp_path / "files" / "lib"
    lib.mkdir(parents=True)
    (lib / "ext.so").write_bytes(os.urandom(20_000_000) + bytes(60_000_000))
    name, version, build = rendered_name()
    out = assemble_package(name, version, "linux-64", build, tmp_path / "linux-64", files_dir=tmp_path / "files",
                           compression_level=1)
    assert Path(out.path).stat().st_size > 19_000_000
    start = time.monotonic()
    check_archive(Path(out.path))
    assert time.monotonic() - start < 10
