"""scripts/metayaml.py: recipe/meta.yaml is generated from recipe.yaml, and --check notices staleness."""

import subprocess
import sys
from pathlib import Path

import pytest

from scripts import condabuild_render as cbr
from scripts.common import RECIPE, RECIPE_DIR, REPO_ROOT
from scripts.metayaml import GeneratorError, generate, main, stale_summary

META = RECIPE_DIR / "meta.yaml"
VARIANT = {"target_platform": "linux-64", "python": "3.12", "pytorch": "2.13", "cuda_compiler_version": "13.0"}


def test_committed_meta_yaml_is_what_the_generator_writes():
    assert META.read_text() == generate(RECIPE.read_text()), "run `python scripts/metayaml.py`"


def test_check_cli_passes_on_the_committed_file():
    result = subprocess.run([sys.executable, "scripts/metayaml.py", "--check"], cwd=REPO_ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "up to date" in result.stdout


def test_check_fails_with_one_line_when_meta_yaml_is_stale(tmp_path, capsys):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE.read_text().replace("    - cuda-cudart-dev\n", "    - cuda-cudart-dev\n    - numpy\n"))
    meta = tmp_path / "meta.yaml"
    meta.write_text(META.read_text())
    assert main(["--check", "--recipe", str(recipe)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "meta.yaml is stale (1 line(s) to add, 0 to remove; first: '+    - numpy')" in err
    # Writing brings it up to date; a second write changes nothing.
    assert main(["--recipe", str(recipe)]) == 0
    assert main(["--check", "--recipe", str(recipe)]) == 0
    assert "numpy" in meta.read_text()


def test_check_reports_a_missing_file(tmp_path):
    assert "missing" in stale_summary("x", None, tmp_path / "meta.yaml")


MINIMAL = """\
schema_version: 1
context:
  name: demo
  version: "1.0"
package:
  name: ${{ name }}
  version: ${{ version }}
build:
  number: 2
  string: py${{ python | version_to_buildstring }}_h${{ hash }}_${{ build_number }}
requirements:
  host:
    - python
    - if: linux
      then:
        - libfoo
      else: libbar
    - if: cuda_compiler_version != "None"
      then: cuda-version ==${{ cuda_compiler_version }}
  run:
    - ${{ pin_subpackage(name, upper_bound='x.x') }}
"""


def test_translation_of_jinja_conditionals_and_hash():
    text = generate(MINIMAL)
    assert "{% set name = \"demo\" %}" in text
    assert "  string: py{{ python | replace('.', '') }}_{{ PKG_HASH }}_{{ PKG_BUILDNUM }}" in text
    assert "    - libfoo  # [linux]" in text
    assert "    - libbar  # [not (linux)]" in text
    assert '    - cuda-version =={{ cuda_compiler_version }}  # [cuda_compiler_version != "None"]' in text
    assert "    - {{ pin_subpackage(name, max_pin='x.x') }}" in text
    meta = cbr.render_text(text, VARIANT)
    assert meta["build"]["string"] == "py312_h0000000_2"
    assert meta["requirements"]["host"] == ["python", "libfoo", "cuda-version ==13.0"]
    assert meta["requirements"]["run"] == ["demo >=1.0,<1.1.0a0"]
    assert cbr.render_text(text, dict(VARIANT, target_platform="osx-arm64"))["requirements"]["host"][1] == "libbar"


def test_script_tests_become_conda_build_test_commands():
    recipe = MINIMAL + """\
tests:
  - python:
      imports: [demo]
  - package_contents:
      files:
        exists: [lib/libdemo.so]
        not_exists: [lib/libdemo.a]
  - script:
      - pytest -q tests/test_demo.py
    files:
      recipe: [tests/test_demo.py]
      source: [tests/data.bin]
    requirements:
      run: [pytest]
  - script:
      env:
        DEMO_ARCHS: ${{ cuda_compiler_version }}
      content:
        - demo-check "${DEMO_ARCHS}"
  - script:
      interpreter: python
      content: |
        import demo
        assert demo.ok
"""
    meta = cbr.render_text(generate(recipe), VARIANT)
    test = meta["test"]
    assert test["requires"] == ["pip", "pytest"]
    assert test["files"] == ["tests/test_demo.py"] and test["source_files"] == ["tests/data.bin"]
    assert test["commands"][:3] == ["test -f $PREFIX/lib/libdemo.so", "test ! -e $PREFIX/lib/libdemo.a", "pip check"]
    assert test["commands"][3] == "pytest -q tests/test_demo.py"
    assert test["commands"][4:6] == ["export DEMO_ARCHS='13.0'", 'demo-check "${DEMO_ARCHS}"']
    assert test["commands"][6].startswith("python - <<'PYTHON_TEST'\nimport demo\n")
    conda = cbr.from_conda_build(meta, VARIANT)
    assert conda.test_env == {"DEMO_ARCHS": "13.0"} and conda.test_requires == ["pytest"]


@pytest.mark.parametrize(
    "snippet, message",
    [
        ("build:\n  noarch: python\n  merge_build_and_host_envs: true\n", "merge_build_and_host_envs"),
        ("requirements:\n  host:\n    - ${{ env.exists('X') }}\n", "function 'exists'"),
        ("requirements:\n  host:\n    - foo ${{ bar | sort }}\n", "filter 'sort'"),
        ("requirements:\n  host:\n    - if: match(python, '>=3.12')\n      then: foo\n", "calls a function"),
        ("tests:\n  - downstream: other\n", "downstream"),
        ("outputs: []\n", "multi-output"),
    ],
)
def test_anything_untranslated_stops_the_generator(snippet, message):
    with pytest.raises(GeneratorError, match=message):
        generate("package:\n  name: x\n  version: '1'\n" + snippet)


def test_generated_file_parses_for_every_platform():
    for platform in cbr.PLATFORMS:
        meta = cbr.render_text(META.read_text(), dict(VARIANT, target_platform=platform, c_compiler="gcc",
                                                      c_stdlib="sysroot", cuda_arch_list="8.0"))
        assert meta["package"]["name"] == "causal-conv1d"
        assert Path(RECIPE_DIR / "build.sh").is_file()  # conda-build runs it: no build/script key
        assert "script" not in meta["build"]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('env.get("CCACHE", default="")', 'environ.get("CCACHE", "")'),
        ("env.get('X', default='/tmp')", "environ.get('X', '/tmp')"),
        ('env.get("X")', "environ.get(\"X\", '')"),
    ],
)
def test_env_get_becomes_conda_build_environ_get(expression, expected):
    from scripts.metayaml import translate_expression

    assert translate_expression(expression) == expected
