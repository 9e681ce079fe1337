"""ssm-conda upload: every damage of tests/damaged_archives.py, packages this project does not build, and
the bad option values, each through a dry run (tests/scripts/upload sends them to servers too)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.bad_input import Case, Context
from tests.damaged_archives import DAMAGES, FOREIGN_NAMES, build_package, foreign_package, good_package, rendered_name

# damage -> (exit status, a part of the one error line): a damaged archive of ours is invalid (exit 1, with
# the table of what was not sent), a file that is not ours is refused before any archive is read (exit 2)
DAMAGE_ERRORS = {
    "truncated": (1, "not a valid conda archive (an io error occurred"),
    "random bytes": (1, "not a valid conda archive (invalid zip archive"),
    "empty": (1, ": empty file; nothing was uploaded"),
    "zip of junk": (1, "not a valid conda archive (failed to open file `info/index.json`"),
    "no pkg member": (1, "share/causal-conv1d/id.txt is missing from the payload (damaged archive); nothing was uploaded"),
    "no info member": (1, "not a valid conda archive (failed to open file `info/index.json`"),
    "garbage pkg member": (1, "not a valid conda archive (an io error occurred: Unknown frame descriptor)"),
    "index lies about name": (1, "file name does not match its index.json (expected numpy-1.7.0-"),
    "index lies about subdir": (1, "lies in linux-64/ but its index.json says subdir linux-aarch64"),
    "noarch in platform folder": (1, "a noarch package in linux-64/ (noarch packages belong in noarch/)"),
    "symlink out of the folder": (2, ", outside it; upload sends only the channel's own files"),
    "foreign package": (2, "linux-64/numpy-2.0.0-py312_0.conda: numpy is not built by recipe/"),
}
DRY_RUN = ("upload", "--dry-run", "--output-dir", "{tmp}/output", "prefix", "--to", "c")
QUETZ = ("upload", "--output-dir", "{tmp}/output", "quetz", "--url", "https://q.example", "--to", "c")


def channel(change: Callable[[Path], object] | None = None) -> Callable[[Context], None]:
    """{tmp}/output holding two packages of ours; `change` gets the second."""

    def setup(ctx: Context) -> None:
        good_package(ctx.tmp / "output", "12.9")
        victim = good_package(ctx.tmp / "output")
        if change:
            change(victim)

    return setup


def auth_file(content: str) -> Callable[[Context], None]:
    def setup(ctx: Context) -> None:
        channel()(ctx)
        (ctx.tmp / "auth.json").write_text(content)
        ctx.env["RATTLER_AUTH_FILE"] = str(ctx.tmp / "auth.json")

    return setup


def not_rendered(subdir: str, version: str = "", generation: str = "all") -> Callable[[Path], Path]:
    """A package of ours named as variants/ does not render it: in another subdir, version or generation."""

    def change(victim: Path) -> Path:
        name, rendered_version, build = rendered_name()
        build = build.replace("_all_", f"_{generation}_")
        return build_package(victim.parents[1] / subdir, name, version or rendered_version, build, subdir=subdir)

    return change


UNRENDERED = "not a build variants/ renders for"
CASES = [
    *(Case(f"upload-{name.replace(' ', '-')}", DRY_RUN, message, status, setup=channel(DAMAGES[name]))
      for name, (status, message) in DAMAGE_ERRORS.items()),
    *(Case(f"upload-foreign-{name}", DRY_RUN, f"{name} is not built by recipe/ (only causal-conv1d, mamba-ssm are published)",
           setup=channel(lambda victim, name=name: foreign_package(victim, name))) for name in FOREIGN_NAMES),
    Case("upload-ours-in-noarch", DRY_RUN, f"{UNRENDERED} noarch", setup=channel(not_rendered("noarch"))),
    Case("upload-ours-for-osx", DRY_RUN, f"{UNRENDERED} osx-arm64", setup=channel(not_rendered("osx-arm64"))),
    Case("upload-old-version", DRY_RUN, f"{UNRENDERED} linux-64", setup=channel(not_rendered("linux-64", version="1.6.0"))),
    Case("upload-arch-build", DRY_RUN, f"{UNRENDERED} linux-64 (an --arch build",
         setup=channel(not_rendered("linux-64", generation="custom"))),
    Case("upload-no-output-dir", DRY_RUN, "/output does not exist (build first, or pass --output-dir)"),
    Case("upload-empty-output-dir", DRY_RUN, "no .conda or .tar.bz2 packages in /",
         setup=lambda ctx: (ctx.tmp / "output" / "linux-64").mkdir(parents=True)),
    *(Case(f"upload-verify-timeout-{value}", (*QUETZ, "--verify-timeout", value),
           f"argument --verify-timeout: '{value}' is not a number of seconds >= 0", setup=channel())
      for value in ("nan", "-1", "inf")),
    *(Case(f"upload-{target}-url-not-a-url", ("upload", "--dry-run", target, "--to", "c", "--url", "not-a-url"),
           "argument --url: 'not-a-url' is not an http(s) URL with a host", setup=channel())
      for target in ("quetz", "artifactory", "prefix", "anaconda")),
    Case("upload-url-password-not-shown", ("upload", "quetz", "--to", "c", "--url", "ftp://me:pw-1234@q.example"),
         "argument --url: 'ftp://****@q.example' is not an http(s) URL"),
    Case("upload-auth-file-not-json", (*QUETZ, "--dry-run"), "/auth.json at line 1 column 2: not what rattler's auth storage "
         "holds", setup=auth_file("{not json")),
    Case("upload-auth-file-wrong-shape", (*QUETZ, "--dry-run"), "/auth.json at line 1 column 26: not what rattler's auth "
         "storage holds", setup=auth_file('{"q.example": "tok-secret"}')),
    Case("upload-attestation-outside-actions", (*DRY_RUN, "--generate-attestation"),
         "--generate-attestation signs with the workflow's identity", setup=channel()),
    Case("upload-credential-option", (*QUETZ, "--api-key", "k-1234"), "--api-key is not accepted (value not shown)"),
]
