"""ssm-conda verify: rebuilt from this checkout's recipe with what the package records, compared byte for byte, one row
per package; a package that is not the checkout's build runs nothing. (Bad input: tests/bad_input/verify.py; the real
packages: tests/test_end_to_end.py.)"""

import shutil

import pytest
from ssm_conda import cli

from tests.reproducible_build import MODULE, build_tiny, tiny_checkout, with_member

PLANTED = f"date +%s%N > $PREFIX/{MODULE}/b.txt"  # a build that writes its own time: never the same twice


@pytest.fixture
def verify(tmp_path, monkeypatch):
    """`ssm-conda verify` of the tiny checkout beside the build root tmp/root, from the channel it was built from."""
    monkeypatch.setenv("SSM_CONDA_BUILD_ROOT", str(tmp_path / "root"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "system-tmp"))
    (tmp_path / "system-tmp").mkdir()

    def run(*args, checkout=tmp_path / "checkout"):
        return cli.main(["--workspace", str(checkout), "verify", *map(str, args), "--no-cache",
                         "-c", str(tmp_path / "empty-channel")])
    return run


def test_a_reproducible_package_is_identical_wherever_it_lies(tmp_path, capsys, verify):
    """A package downloaded from a channel: not in the folder it was built into, which is gone, and saved under
    another name (`curl -o`, a browser): what it is comes from its index.json. Nothing is left behind."""
    built = build_tiny(tmp_path / "root", tmp_path / "out")
    downloaded = shutil.copy(built, tmp_path / "downloaded.conda")
    shutil.rmtree(tmp_path / "out")
    assert verify(downloaded) == 0
    out = capsys.readouterr().out
    assert f"rebuilding downloaded.conda in {tmp_path / 'root'}" in out
    row = next(line for line in out.splitlines() if line.startswith("causal-conv1d "))
    assert f"causal-conv1d  {built.name.split('-')[-1].removesuffix('.conda')}  identical" in row and "sha256" in row, out
    # rattler-build's rebuild unpacks the recipe into a temporary folder it keeps: it went into the build root
    assert [p.name for p in (tmp_path / "root").iterdir()] == [".lock"] and not any((tmp_path / "system-tmp").iterdir())


def test_a_planted_change_is_named_with_its_files_and_fails(tmp_path, capsys, verify):
    good = build_tiny(tmp_path / "root", tmp_path / "good", tiny_checkout(tmp_path / "checkout"))
    planted = build_tiny(tmp_path / "root", tmp_path / "planted", tiny_checkout(tmp_path / "planted-checkout", PLANTED))
    assert verify(good) == 0
    assert verify(planted, checkout=tmp_path / "planted-checkout") == 1
    captured = capsys.readouterr()
    rows = [line for line in captured.out.splitlines() if line.startswith("causal-conv1d ")]
    assert "identical" in rows[0] and "differs" in rows[1] and f"{MODULE}/b.txt (content)" in rows[1], captured.out
    assert "1 of 1 package(s) not reproduced: causal-conv1d" in captured.err


def test_a_package_of_another_recipe_runs_nothing(tmp_path, capsys, verify):
    """Its recorded build script writes a marker: verify names the files that differ from the checkout's recipe and
    stops before anything is built."""
    marker = tmp_path / "marker"
    hostile = build_tiny(tmp_path / "root", tmp_path / "out", tiny_checkout(tmp_path / "hostile", f"touch {marker}"))
    marker.unlink()
    tiny_checkout(tmp_path / "checkout")
    assert verify(hostile) == 2
    err = capsys.readouterr().err
    assert f"{hostile}: its recipe is not this checkout's (build.sh differ); check out the revision" in err
    assert not marker.exists() and [p.name for p in (tmp_path / "root").iterdir()] == [".lock"]


def rendered(old: str, new: str):
    return lambda data: data.replace(old.encode(), new.encode(), 1) if old.encode() in data else pytest.fail(old)


@pytest.mark.parametrize(("old", "new", "refusal"), [
    # the recorded recipe's files are the checkout's, but the rendered recipe, which the rebuild runs, is another
    ("file: build.sh", "content: touch {tmp}/marker", "its rendered_recipe.yaml is not this checkout's recipe rendered for"),
    ("  variant:\n", "  variant:\n    extra_key: '1'\n", "its rendered_recipe.yaml is not this checkout's recipe rendered for"),
    # rattler-build empties the recorded work_dir before building: a folder of the user's
    ("    work_dir: {tmp}/root/bld/rattler-build_causal-conv1d/work", "    work_dir: {tmp}/victim",
     "it was built in {tmp}/root/bld/rattler-build_causal-conv1d, not in {tmp}/root/bld"),
    ("finalized_sources: []", "finalized_sources:\n- url: https://evil.example/x.tar.gz\n  sha256: " + "0" * 64,
     "its sources are not the recipe's"),
    ("  channels:\n  - file://", "  channels:\n  - https://evil.example/chan\n  - file://",
     "it was built from https://evil.example/chan, not from a channel named with -c"),
    ("  host: null", "  host:\n    specs: []\n    resolved:\n    - {name: gcc, subdir: linux-64, sha256: '" + "0" * 64
     + "', url: 'https://evil.example/linux-64/gcc-1-0.conda'}",
     "its build environment holds https://evil.example/linux-64/gcc-1-0.conda, which no channel named with -c lists"),
    ("system_tools:", "post_link: evil\nsystem_tools:",
     "its rendered_recipe.yaml records what this project's builds do not (post_link)"),
])
def test_a_crafted_rendered_recipe_is_refused_before_anything_is_built(tmp_path, capsys, verify, old, new, refusal):
    built = build_tiny(tmp_path / "root", tmp_path / "out")
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "keep.txt").write_text("the user's")
    old, new, refusal = (text.replace("{tmp}", str(tmp_path)) for text in (old, new, refusal))
    crafted = with_member(built, "info/recipe/rendered_recipe.yaml", rendered(old, new), tmp_path / "crafted")
    assert verify(crafted) == 2
    err = capsys.readouterr().err
    assert f"{crafted}: {refusal}" in err and len(err.strip().splitlines()) == 1, err
    assert (tmp_path / "victim" / "keep.txt").read_text() == "the user's" and not (tmp_path / "marker").exists()
    assert [p.name for p in (tmp_path / "root").iterdir()] == [".lock"]


@pytest.mark.parametrize(("document", "refusal"), [
    (b"a string", "its rendered_recipe.yaml records what this project's builds do not"),
    (b"- recipe\n- build_configuration\n", "its rendered_recipe.yaml is malformed (AttributeError)"),
    (b"recipe: [unclosed", "its rendered_recipe.yaml is malformed (ParserError)"),
])
def test_a_rendered_recipe_that_is_no_mapping_is_one_line(tmp_path, capsys, verify, document, refusal):
    built = build_tiny(tmp_path / "root", tmp_path / "out")
    assert verify(with_member(built, "info/recipe/rendered_recipe.yaml", lambda _: document, tmp_path / "x")) == 2
    err = capsys.readouterr().err
    assert refusal in err and len(err.splitlines()) == 1, err


def test_a_payload_the_recipe_does_not_make_is_refused(tmp_path, capsys, verify):
    """The contents rules upload applies (ssm_conda.contents): a depends the recipe does not render is refused."""
    built = build_tiny(tmp_path / "root", tmp_path / "out")
    crafted = with_member(built, "info/index.json", rendered('"depends": []', '"depends": ["evil-package"]'), tmp_path / "x")
    assert verify(crafted) == 2
    assert "depends on evil-package" in capsys.readouterr().err

