"""Reproducible archives: one fixed build folder, the source's time in place of the build's, and the comparison
verify reports. (The real packages' rebuilds are in tests/test_end_to_end.py.)"""

import fcntl
import io
import json
import os
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

import pytest
import zstandard
from rattler.package_streaming import extract
from ssm_conda.channels import check_archive
from ssm_conda.console import UsageError
from ssm_conda.reproducible import BUILD_ID_NOTE, build_root, canonical, differing_files, without_build_id

from tests.bad_input import read_only
from tests.reproducible_build import EPOCH, MODULE, build_tiny


def members(package: Path) -> dict[str, tarfile.TarInfo]:
    found = {}
    with zipfile.ZipFile(package) as archive:
        for name in archive.namelist():
            assert archive.getinfo(name).date_time == time.gmtime(EPOCH)[:6], name
            if name.endswith(".tar.zst"):
                data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(archive.read(name))).read()
                with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                    found |= {m.name: m for m in tar.getmembers()}
    return found


def test_two_builds_at_different_times_into_different_folders_are_byte_identical(tmp_path):
    first = build_tiny(tmp_path / "root", tmp_path / "a")
    time.sleep(1.1)  # another build time, to the second
    second = build_tiny(tmp_path / "root", tmp_path / "b")
    assert first.read_bytes() == second.read_bytes()
    assert first.stat().st_mode & 0o777 == 0o644
    check_archive(first)  # py-rattler reads every member, paths.json's sizes and hashes hold
    # every time in it is the source's: the members', index.json's and the rendered recipe's
    assert {m.mtime for m in members(first).values()} == {EPOCH}
    extract(first, tmp_path / "unpacked")
    assert json.loads((tmp_path / "unpacked" / "info" / "index.json").read_text())["timestamp"] == EPOCH * 1000
    assert "\n  timestamp: 2023-11-14T22:13:20Z\n" in (tmp_path / "unpacked/info/recipe/rendered_recipe.yaml").read_text()


def test_a_build_that_is_not_deterministic_gives_other_bytes(tmp_path):
    """The check above can fail: a build script writing the time makes another archive."""
    first = build_tiny(tmp_path / "root", tmp_path / "a", extra=f"date +%s%N > $PREFIX/{MODULE}/b.txt")
    second = build_tiny(tmp_path / "root", tmp_path / "b")
    assert first.read_bytes() != second.read_bytes()
    extract(first, tmp_path / "x")
    extract(second, tmp_path / "y")
    assert differing_files(tmp_path / "x", tmp_path / "y") == {"info/paths.json": "content", f"{MODULE}/b.txt": "content"}


def elf(build_id: bytes, text: bytes = b"code") -> bytes:
    return b"\x7fELF" + bytes(12) + BUILD_ID_NOTE + build_id + text


def test_differences_are_named_build_id_timestamp_content_or_missing(tmp_path):
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    files = {
        "lib/same.so": (elf(b"a" * 20), elf(b"a" * 20)),
        "lib/build_id.so": (elf(b"a" * 20), elf(b"b" * 20)),
        "lib/code.so": (elf(b"a" * 20), elf(b"a" * 20, b"edoc")),
        "lib/both.so": (elf(b"a" * 20), elf(b"b" * 20, b"edoc")),
        "info/index.json": (b'{\n  "name": "x",\n  "timestamp": 1\n}', b'{\n  "name": "x",\n  "timestamp": 2\n}'),
        "info/about.json": (b'{"channels": ["a"]}', b'{"channels": ["b"]}'),
        "only-ours.txt": (b"x", None),
        "only-theirs.txt": (None, b"x"),
    }
    for name, contents in files.items():
        for root, content in zip((ours, theirs), contents, strict=True):
            if content is not None:
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_bytes(content)
    assert differing_files(ours, theirs) == {
        "info/about.json": "content", "info/index.json": "timestamp", "lib/both.so": "content",
        "lib/build_id.so": "build ID", "lib/code.so": "content", "only-ours.txt": "only in the original",
        "only-theirs.txt": "only in the rebuild"}
    assert without_build_id(b"not an ELF" + BUILD_ID_NOTE + b"a" * 20) == b"not an ELF" + BUILD_ID_NOTE + b"a" * 20


def test_the_build_root_is_one_builds_at_a_time(tmp_path, capsys):
    """A second build waits for the first (the build folder in it has a fixed name), saying so."""
    root = tmp_path / "root"
    root.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", f"import fcntl, time; f = open({str(root / '.lock')!r}, 'w'); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(1.5)"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    (root / "bld" / "rattler-build_x").mkdir(parents=True)
    start = time.monotonic()
    with build_root(root):
        waited = time.monotonic() - start
        assert not (root / "bld").exists()  # what an earlier build left is gone before this one starts
        with (root / ".lock").open() as lock, pytest.raises(BlockingIOError):
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    holder.wait()
    assert waited > 0.5 and "waiting for another build or verify to finish with" in capsys.readouterr().out


def test_a_build_root_it_cannot_write_is_one_line(tmp_path):
    (tmp_path / "ro").mkdir()
    with read_only(tmp_path / "ro"), pytest.raises(UsageError, match=r"SSM_CONDA_BUILD_ROOT=.*/ro/root: cannot build there"):
        with build_root(tmp_path / "ro" / "root"):
            pass


def run_export(spec: str, source: str) -> str:
    return f"    - spec: {spec}\n      from: host\n      run_export: {source}\n"


def test_run_exports_and_depends_are_written_in_one_order():
    """rattler-build lists run exports in another order each run (a hash map's): the archive has them sorted, each
    run of them in its place, and index.json's depends and constrains sorted, as conda-build writes them."""
    exports = [run_export("python_abi 3.11.* *_cp311", "python"), run_export("libgcc >=12", "gcc_linux-64"),
               run_export("cuda-arch >=9.0", "cuda-arch")]
    recipe = ("  timestamp: 2026-12-05T22:50:27.105797046Z\n  host:\n    specs:\n    - source: pip\n" + "".join(exports)
              + "    resolved: []\n  run:\n    depends:\n    - source: python\n" + "".join(reversed(exports)))
    written = canonical("info/recipe/rendered_recipe.yaml", recipe.encode(), EPOCH).decode()
    in_order = "".join(sorted(exports))
    assert written == ("  timestamp: 2023-11-14T22:13:20Z\n  host:\n    specs:\n    - source: pip\n" + in_order
                       + "    resolved: []\n  run:\n    depends:\n    - source: python\n" + in_order)
    index = {"name": "x", "depends": ["python_abi 3.11.* *_cp311", "libgcc >=12", "cuda-arch >=9.0"],
             "constrains": ["b", "a"], "timestamp": 1}
    assert json.loads(canonical("info/index.json", json.dumps(index, indent=2).encode(), EPOCH)) == {
        "name": "x", "depends": ["cuda-arch >=9.0", "libgcc >=12", "python_abi 3.11.* *_cp311"], "constrains": ["a", "b"],
        "timestamp": EPOCH * 1000}
    assert canonical("site-packages/x.py", b"depends", EPOCH) == b"depends"


def record(name: str, depends: str = "[]") -> str:
    return (f"    - arch: x86_64\n      depends: {depends}\n      name: {name}\n"
            f"      run_exports:\n        weak:\n        - {name}\n")


def test_the_records_of_each_environment_are_written_in_one_order():
    """The solver lists an environment's packages (`resolved:`) in another order from run to run (measured: libgcc
    before or after libstdcxx): the archive has them by name, every line kept; a record that differs still differs."""
    def recipe(build: list[str], host: list[str]) -> bytes:
        return ("finalized_dependencies:\n  build:\n    specs:\n    - source: ninja\n    resolved:\n" + "".join(build)
                + "  host:\n    specs: []\n    resolved:\n" + "".join(host) + "  run:\n    depends: []\n").encode()

    build, host = [record("ninja"), record("ccache")], [record("libstdcxx", "[libgcc]"), record("libgcc"), record("abi")]
    written = canonical("info/recipe/rendered_recipe.yaml", recipe(build, host), EPOCH)
    assert written == recipe(sorted(build), [host[2], host[1], host[0]])
    assert canonical("info/recipe/rendered_recipe.yaml", recipe(build[::-1], host[::-1]), EPOCH) == written
    changed = recipe(build, [record("libstdcxx", "[libgcc 13]"), *host[1:]])
    assert canonical("info/recipe/rendered_recipe.yaml", changed, EPOCH) != written


def refusal(root) -> str:
    with pytest.raises(UsageError) as raised, build_root(root):
        pytest.fail("the build root was accepted")
    return str(raised.value)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_another_users_build_root_is_refused(tmp_path):
    """Another user creates /tmp/ssm-conda-build first: its packages would be solved from, its files deleted."""
    (theirs := tmp_path / "theirs").mkdir()
    os.chown(theirs, 65534, 65534)
    assert f"SSM_CONDA_BUILD_ROOT={theirs}: it belongs to another user (uid 65534); set SSM_CONDA_BUILD_ROOT" in refusal(theirs)


def test_a_build_root_another_user_may_change_is_refused(tmp_path):
    (open_to_all := tmp_path / "open").mkdir()
    open_to_all.chmod(0o777)
    assert "other users may write in it (mode 777); set SSM_CONDA_BUILD_ROOT to a folder of yours alone" in refusal(open_to_all)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    assert f"a symbolic link is on its path (it leads to {tmp_path / 'elsewhere'})" in refusal(tmp_path / "link")
    assert "a symbolic link is on its path" in refusal(tmp_path / "link" / "root")
    assert not (tmp_path / "elsewhere" / "root").exists() and not any((tmp_path / "open").iterdir())


def test_a_lock_that_is_a_link_truncates_nothing(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("31 bytes of somebody's content.")
    (root := tmp_path / "root").mkdir(mode=0o700)
    (root / ".lock").symlink_to(victim)
    assert "cannot build there (Too many levels of symbolic links)" in refusal(root)
    assert victim.read_text() == "31 bytes of somebody's content."


def test_a_build_root_is_made_private_and_emptied_of_what_was_planted(tmp_path):
    root = tmp_path / "root"
    root.mkdir(mode=0o755)
    (root / "linux-64").mkdir()
    (root / "linux-64" / "causal-conv1d-1.7.0-planted_0.conda").write_bytes(b"solved from, were it kept")
    (root / "escape").symlink_to(tmp_path / "outside", target_is_directory=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "keep.txt").write_text("kept")
    with build_root(root):
        assert stat.S_IMODE(root.stat().st_mode) == 0o700 and sorted(p.name for p in root.iterdir()) == [".lock", "tmp"]
        assert tempfile.gettempdir() == os.environ["TMPDIR"] == str(root / "tmp")
        (root / "tmp" / "left").write_text("a temporary file")
    assert [p.name for p in root.iterdir()] == [".lock"] and (tmp_path / "outside" / "keep.txt").read_text() == "kept"
    assert tempfile.gettempdir() != str(root / "tmp")
