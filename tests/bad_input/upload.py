"""ssm-conda upload: every damage of tests/damaged_archives.py, packages this project does not build, and
the bad option values, each through a dry run (tests/scripts/upload sends them to servers too)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ssm_conda.upload.targets import NAME_RULE

from tests.bad_input import Case, Context
from tests.damaged_archives import DAMAGES, FOREIGN_NAMES, build_package, foreign_package, good_package, rendered_name

# damage -> (exit status, a part of the one error line): a damaged archive of ours is invalid (exit 1, with
# the table of what was not sent), a file that is not ours is refused before any archive is read (exit 2)
OUTSIDE = "outside the package; nothing was uploaded"
NOT_OURS = ("is not causal-conv1d's (only site-packages/{causal_conv1d/*,causal_conv1d-*.dist-info/*,"
            "causal_conv1d_cuda.py,__pycache__/causal_conv1d_cuda.*.pyc}, etc/conda/test-files/causal-conv1d/ and info/ are)")
DAMAGE_ERRORS = {
    "truncated": (1, "not a valid conda archive (File is not a zip file)"),
    "random bytes": (1, "not a valid conda archive (File is not a zip file)"),
    "empty": (1, ": empty file; nothing was uploaded"),
    "zip of junk": (1, "not a valid conda archive (failed to open file `info/index.json`"),
    "no pkg member": (1, "etc/conda/test-files/causal-conv1d/test_import.py is missing from the payload (damaged archive); "
                         "nothing was uploaded"),
    "no info member": (1, "not a valid conda archive (failed to open file `info/index.json`"),
    "garbage pkg member": (1, "not a valid conda archive (zstd decompress error: Unknown frame descriptor)"),
    "index lies about name": (1, "file name does not match its index.json (expected numpy-1.7.0-"),
    "index lies about subdir": (1, "lies in linux-64/ but its index.json says subdir linux-aarch64"),
    "noarch in platform folder": (1, ": not a version-independent package for linux-64 (noarch: python in a platform's subdir)"),
    "symlink out of the folder": (2, ", outside it; upload sends only the channel's own files"),
    "foreign package": (2, "linux-64/numpy-2.0.0-py312_0.conda: numpy is not built by recipe/"),
    # issue 41: crafted to escape the package, fill the disk, or bring files and depends that are not ours
    "paths.json lists ../../etc/passwd": (1, ": ../../etc/passwd lies outside the prefix (info/paths.json may list only "
                                             "relative paths without ..) (damaged archive); nothing was uploaded"),
    "paths.json lists /etc/hostname": (1, ": /etc/hostname lies outside the prefix"),
    "symlink to /etc": (1, ": member lib/etc links to /etc, upwards or " + OUTSIDE),
    "symlink to ../../x": (1, ": member lib/up links to ../../x, upwards or " + OUTSIDE),
    "symlink upwards": (1, ": member lib/d/u links to .., upwards or " + OUTSIDE),
    "member named ../x": (1, ": member ../x lies " + OUTSIDE),
    "member named /abs": (1, ": member /abs lies " + OUTSIDE),
    "hardlink out": (1, ": member lib/hard links to ../../etc/passwd, upwards or " + OUTSIDE),
    "fifo": (1, ": member lib/fifo is a device or fifo (a package holds only files, folders and links)"),
    "zip bomb": (1, ": unpacks to over 512 MiB (at member lib/zeros): a zip bomb?; nothing was uploaded"),
    "foreign bin/python3.11": (1, ": bin/python3.11 " + NOT_OURS),
    "foreign lib/libstdc++.so.6": (1, ": lib/libstdc++.so.6 " + NOT_OURS),
    "foreign site-packages/torch": (1, ": site-packages/torch/__init__.py " + NOT_OURS),
    "depends on evil-package": (1, ": depends on evil-package: neither a run requirement of the recipe nor a run export"),
    "another build hash": (1, "_cp310abi3_torch213_all_hdeadbee_0, variants/ renders causal-conv1d-1.7.0-cuda1"),
    # a build of the layout per Python (before the packages became version-independent), or another project's idea of ours
    "not version-independent": (1, ": not a version-independent package for linux-64 (noarch: python in a platform's subdir)"),
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
    Case("upload-no-output-dir", DRY_RUN, "/output is not a directory (build first, or pass --output-dir)"),
    Case("upload-output-dir-is-a-file", DRY_RUN, "/output is not a directory (build first, or pass --output-dir)",
         setup=lambda ctx: (ctx.tmp / "output").write_text("")),
    *(Case(f"upload-{target}-to-{label}", ("upload", "--dry-run", target, "--to", value, *url), f"--to {value!r} is not one "
           f"name on {server}; accepted: {NAME_RULE}", setup=channel())
      for target, server, url in (("prefix", "prefix.dev", ()), ("anaconda", "anaconda.org", ()),
                                  ("quetz", "quetz", ("--url", "https://q.example")),
                                  ("artifactory", "artifactory", ("--url", "https://a.example")))
      for label, value in (("parent", "../../other"), ("slash", "org/chan"), ("dotdot", ".."), ("space", "a b"))),
    Case("upload-anaconda-label-parent", ("upload", "--dry-run", "anaconda", "--to", "me", "--label", "../x"),
         f"--label '../x' is not one name on anaconda.org; accepted: {NAME_RULE}", setup=channel()),
    *(Case(f"upload-s3-to-{label}", ("upload", "--dry-run", "s3", "--to", value, "--region", "r"),
           f"--to for s3 must look like s3://BUCKET/PATH, got {value!r}; accepted in the bucket and each part of PATH: "
           f"{NAME_RULE}", setup=channel())
      for label, value in (("parent", "s3://../.."), ("path-parent", "s3://b/ch/../x"), ("empty-part", "s3://b/a//c"),
                           ("bucket-slash-only", "s3:///x"), ("query", "s3://b/x?y=1"))),
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
