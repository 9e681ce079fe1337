"""ssm-conda verify: rebuilt from what the package records, compared byte for byte, one row per package.
(Bad input: tests/bad_input/verify.py; the real packages: tests/test_end_to_end.py.)"""

import shutil

from ssm_conda import cli

from tests.reproducible_build import build_tiny

PLANTED = "date +%s%N > $PREFIX/share/fake/b.txt"  # a build that writes its own time: never the same twice


def test_a_reproducible_package_is_identical_wherever_it_lies(tmp_path, capsys, monkeypatch):
    """A package downloaded from a channel: not in the folder it was built into, which is gone, and saved under
    another name (`curl -o`, a browser): what it is comes from its index.json."""
    monkeypatch.setenv("SSM_CONDA_BUILD_ROOT", str(tmp_path / "root"))
    built = build_tiny(tmp_path / "root", tmp_path / "out")
    downloaded = shutil.copy(built, tmp_path / "downloaded.conda")
    shutil.rmtree(tmp_path / "out")
    assert cli.main(["verify", str(downloaded), "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert f"rebuilding downloaded.conda in {tmp_path / 'root'}" in out
    row = next(line for line in out.splitlines() if line.startswith("causal-conv1d "))
    assert f"causal-conv1d  {built.name.split('-')[-1].removesuffix('.conda')}  identical" in row and "sha256" in row, out


def test_a_planted_change_is_named_with_its_files_and_fails(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SSM_CONDA_BUILD_ROOT", str(tmp_path / "root"))
    good = build_tiny(tmp_path / "root", tmp_path / "good")
    planted = build_tiny(tmp_path / "root", tmp_path / "planted", extra=PLANTED)
    assert cli.main(["verify", str(good), str(planted), "--no-cache"]) == 1
    captured = capsys.readouterr()
    rows = [line for line in captured.out.splitlines() if line.startswith("causal-conv1d ")]
    assert len(rows) == 2 and "identical" in rows[0], captured.out
    assert "differs" in rows[1] and "share/fake/b.txt (content)" in rows[1], captured.out
    assert "1 of 2 package(s) not reproduced: causal-conv1d" in captured.err
