"""What a package of this project may hold: only its own files, named and depending as recipe/ renders its variant."""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path

from rattler.package import IndexJson, PathsJson

from ssm_conda.matrix import PlannedVariant
from ssm_conda.project import RUN_EXPORTS, package


def check_contents(unpacked: Path, index: IndexJson, variant: PlannedVariant) -> None:
    """ValueError (one line) unless the unpacked package is version-independent (noarch: python in its platform's subdir,
    files in site-packages/, as the recipes render), holds only its module's files, its test files and info/, is named
    as `variant` renders, and depends on exactly what the recipe renders."""
    record, recipe, site = package(variant.package), variant.rendered.recipe, "site-packages/"
    if not index.noarch.python or index.subdir == "noarch":
        raise ValueError(f"not a version-independent package for {index.subdir} (noarch: python in a platform's subdir)")
    tests = f"etc/conda/test-files/{variant.package}/"
    own = (f"{record.module}/*", f"{record.module}-*.dist-info/*", *(f"{module}.py" for module in record.extensions),
           *(f"__pycache__/{module}.*.pyc" for module in record.extensions))
    for path in (str(entry.relative_path) for entry in PathsJson.from_package_directory(unpacked).paths):
        inside = path.removeprefix(site) if path.startswith(site) else "/"
        if not (path.startswith(("info/", tests)) or any(fnmatch(inside, pattern) for pattern in own)):
            raise ValueError(f"{path} is not {variant.package}'s (only {site}{{{','.join(own)}}}, {tests} and info/ are)")
    found = "-".join(map(str, (index.name.normalized, index.version, index.build)))
    if found != (rendered := f"{variant.package}-{recipe.package.version}-{variant.build_string}"):
        raise ValueError(f"index.json says {found}, variants/ renders {rendered}")
    requirements = [*recipe.requirements.build, *recipe.requirements.host]
    exported = {name for spec in requirements for name in RUN_EXPORTS.get(spec.split()[0].removesuffix(f"_{index.subdir}"), ())}
    if missing := [spec for spec in recipe.requirements.run if spec not in index.depends]:
        raise ValueError(f"depends lacks {missing[0]}, a run requirement of the recipe")
    if foreign := [spec for spec in index.depends if spec not in recipe.requirements.run and spec.split()[0] not in exported]:
        raise ValueError(f"depends on {foreign[0]}: neither a run requirement of the recipe nor a run export of its build "
                         f"and host requirements ({', '.join(sorted(exported))})")
