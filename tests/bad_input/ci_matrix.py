"""ssm-conda-dev ci-matrix: a missing or empty --variants-dir, and variant files rattler-build cannot read or that lack
what the tooling reads. `variant_file_cases` serves doctor --variants-dir too."""

from __future__ import annotations

from collections.abc import Callable

import yaml

from tests.bad_input import Case, Context

VALID = {"cuda_compiler": ["cuda-nvcc"], "cuda_compiler_version": ["13.0"], "c_compiler": ["gcc"], "c_compiler_version": ["15"],
         "cxx_compiler": ["gxx"], "cxx_compiler_version": ["15"], "c_stdlib": ["sysroot"], "c_stdlib_version": ["2.28"],
         "python": ["3.12"], "pytorch": ["2.13"], "gpu_generation": ["all", "sm90"], "cuda_arch_list": ["8.0;9.0+PTX", "9.0+PTX"],
         "cuda_arch_supported": ["8.0;9.0"], "nvcc_lineinfo": ["0"], "zip_keys": [["gpu_generation", "cuda_arch_list"]]}
FILE = "cuda999.yaml"


def variants(text: str | dict | None) -> Callable[[Context], None]:
    """A variants folder {variants} holding one file (YAML text, or VALID updated by a dict; None: no file)."""

    def setup(context: Context) -> None:
        folder = context.tmp / "variants"
        folder.mkdir()
        context.values["variants"] = str(folder)
        if isinstance(text, dict):
            (folder / FILE).write_text(yaml.safe_dump({k: v for k, v in {**VALID, **text}.items() if v is not None}))
        elif text is not None:
            (folder / FILE).write_text(text)

    return setup


BROKEN = [  # (id, the file, what the one line says after "cuda999.yaml: not a valid variant file: ")
    ("yaml-error", "python: [3.12\n  - x: :\n", "2:6: illegal placement of ':' indicator"),
    ("top-level-list", "- 1\n- 2\n", "1:1: Top level must be a mapping"),
    ("empty", "", "no cuda_compiler_version"),
    ("no-cuda", {"cuda_compiler_version": None}, "no cuda_compiler_version"),
    ("no-generations", {"gpu_generation": None, "zip_keys": None}, "no gpu_generation"),
    ("scalar-not-list", "cuda_compiler_version: '13.0'\n", "Variant values for 'cuda_compiler_version' must be a list"),
    ("nested-value", {"python": [{"version": "3.12"}]}, "28:10: expected a scalar, found a non-scalar"),
    ("two-cudas", {"cuda_compiler_version": ["12.9", "13.0"]}, "cuda_compiler_version ['12.9', '13.0']: give one X.Y"),
    ("cuda-not-a-version", {"cuda_compiler_version": ["thirteen"]}, "cuda_compiler_version ['thirteen']: give one X.Y"),
    ("python-not-a-version", {"python": [True]}, "python True: not X.Y"),
    ("pytorch-not-a-version", {"pytorch": ["latest"]}, "pytorch 'latest': not X.Y"),
    ("no-all-generation", {"gpu_generation": ["sm8x", "sm90"]}, "gpu_generation ['sm8x', 'sm90']: no 'all'"),
    ("generations-unpaired", {"cuda_arch_list": ["8.0;9.0+PTX"]},
     "gpu_generation and cuda_arch_list differ in length (2, 1)"),
    ("recipe-does-not-render", {"c_stdlib": None}, "causal-conv1d's recipe does not render with it: Template rendering failed"),
    ("bad-arch-list", {"cuda_arch_list": ["8.0;9.0+PTX", "sm_90"]}, "architecture 'sm_90' is not X.Y or X.Y+PTX"),
]


def variant_file_cases(command: tuple[str, ...], dev: bool = False) -> list[Case]:
    name = command[0]
    return [
        Case(f"{name}-variants-dir-missing", (*command, "--variants-dir", "{tmp}/none"), "no such directory",
             setup=variants(None), dev=dev),
        Case(f"{name}-variants-dir-a-file", (*command, "--variants-dir", "{variants}/" + FILE), "no such directory",
             setup=variants({}), dev=dev),
        *(Case(f"{name}-variants-{case_id}", (*command, "--variants-dir", "{variants}"),
               f"{FILE}: not a valid variant file: {message}", setup=variants(text), dev=dev)
          for case_id, text, message in BROKEN),
    ]


CASES = [
    *variant_file_cases(("ci-matrix",), dev=True),
    Case("ci-matrix-variants-dir-empty", ("ci-matrix", "--variants-dir", "{variants}"), "no variant files (*.yaml) in",
         setup=variants(None), dev=True),
]
