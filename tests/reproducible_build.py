"""A tiny real package built as `ssm-conda build` builds (reproducible.build_root and build_in), for the tests
of the reproducible archive and of `ssm-conda verify`."""

from __future__ import annotations

from pathlib import Path

from ssm_conda.reproducible import EPOCH_FILE, build_in, build_root

BUILD = "cuda130_py312_torch213_all_h0_0"
EPOCH = 1_700_000_000  # 2023-11-14T22:13:20Z


def build_tiny(root: Path, out: Path, extra: str = ":", epoch: int = EPOCH) -> Path:
    """causal-conv1d (noarch, no dependencies) built in the build root `root` into the channel `out`; its build
    script writes the source's time as recipe/shared/build-extension.sh does, then runs `extra`."""
    from rattler_build import RenderConfig, Stage0Recipe, ToolConfiguration, VariantConfig

    script = [f'echo {epoch} > "$(dirname "$SRC_DIR")/{EPOCH_FILE}"',
              "mkdir -p $PREFIX/share/fake && echo hello > $PREFIX/share/fake/a.txt", extra]
    recipe = f"""
package: {{name: causal-conv1d, version: "1.7.0"}}
build:
  number: 0
  noarch: generic
  string: {BUILD}
  script: {script!r}
"""
    (rendered,) = Stage0Recipe.from_yaml(recipe, recipe_dir=root.parent / "recipe").render(VariantConfig(), RenderConfig())
    out.mkdir(parents=True, exist_ok=True)
    with build_root(root):
        return build_in(root, rendered, out, tool_config=ToolConfiguration(test_strategy="skip", keep_build=True),
                        channels=[root.as_uri()])
