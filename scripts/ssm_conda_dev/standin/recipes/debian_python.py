"""Turn Debian's CPython, copied into a conda prefix, into one that behaves like conda-forge's:
site-packages under lib/pythonX.Y (Debian's site and sysconfig look in dist-packages, and outside a
venv install into local/), and sysconfig data that names this prefix and conda's compilers, under
Debian's name, upstream's and conda-forge's (_sysconfigdata_<arch>_conda_linux_gnu, which
cross-python reads).

    python debian_python.py PREFIX X.Y TRIPLET
"""

from __future__ import annotations

import pprint
import re
import runpy
import sys
from pathlib import Path

prefix, py_ver, triplet = Path(sys.argv[1]), sys.argv[2], sys.argv[3]  # aarch64-linux-gnu
stdlib = prefix / "lib" / f"python{py_ver}"
conda_triplet = triplet.replace("-linux-gnu", "-conda-linux-gnu")


def replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if old not in text:
        sys.exit(f"{path.name}: Debian's code changed, not found: {old[:60]!r}")
    path.write_text(text.replace(old, new, 1))


# Debian's site module is frozen into the interpreter (editing site.py changes nothing); it reads
# lib/python3/dist-packages, where a .pth adds conda's site-packages, .pth files included.
dist = prefix / "lib" / "python3" / "dist-packages"
dist.mkdir(parents=True, exist_ok=True)
(dist / "conda-site-packages.pth").write_text(
    f"import os, site, sys; site.addsitedir(os.path.join(sys.prefix, 'lib', 'python{py_ver}', 'site-packages'))\n")
# Debian's hook that sends setuptools' installs to local/ (upstream and conda-forge have none)
(stdlib / "_distutils_system_mod.py").unlink()
replace(stdlib / "sysconfig.py", "            prefix_scheme = 'posix_local'\n", "            prefix_scheme = 'posix_prefix'\n")

debian_data = stdlib / f"_sysconfigdata__{triplet}.py"
build_time_vars = runpy.run_path(str(debian_data.resolve()))["build_time_vars"]
swaps = [(f"/usr/include/{triplet}/python{py_ver}", f"{prefix}/include/python{py_ver}"),
         (f"/usr/lib/{triplet}", f"{prefix}/lib"), ("/usr", str(prefix))]


def conda_value(value: object) -> object:
    if not isinstance(value, str):
        return value
    for old, new in swaps:
        value = re.sub(rf"(?<![\w/]){re.escape(old)}(?=/|\s|$|')", new, value)
    return re.sub(rf"\b{re.escape(triplet)}-(gcc|g\+\+|cpp|ar|ranlib)\b", rf"{conda_triplet}-\1", value)


data = {key: conda_value(value) for key, value in build_time_vars.items()}
body = f"# conda-style sysconfig data made from Debian's\nbuild_time_vars = {pprint.pformat(data)}\n"
# Debian's interpreter reads its own name (no platform in it), upstream's has linux_, cross-python conda's
for name in (debian_data.stem, f"_sysconfigdata__linux_{triplet}", f"_sysconfigdata_{conda_triplet.replace('-', '_')}"):
    (stdlib / f"{name}.py").unlink(missing_ok=True)
    (stdlib / f"{name}.py").write_text(body)
print(f"sysconfig: prefix {data['prefix']}, CC {data['CC']}, EXT_SUFFIX {data['EXT_SUFFIX']}")
