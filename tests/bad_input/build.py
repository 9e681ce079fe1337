"""ssm-conda build: each bad input stops it before "building N variant(s)", with nothing created (no output
folder, no compiler cache folder in $SSM_CONDA_CACHE, no src_cache/ or build-logs/) and no download."""

from __future__ import annotations

from tests.bad_input import Case, Context

ONE = ("--cuda", "13.0", "--python", "3.12", "--torch", "2.13", "--generation", "sm90", "--package", "causal-conv1d")
ENV = "SSM_CONDA_CCACHE_DIR"


def folder(name: str, read_only: bool = False):  # noqa: ANN201
    def setup(context: Context) -> None:
        (context.tmp / name).mkdir()
        if read_only:
            context.read_only(context.tmp / name)

    return setup


def file(name: str):  # noqa: ANN201
    def setup(context: Context) -> None:
        (context.tmp / name).write_text("")

    return setup


def ccache(value: str, setup=None):  # noqa: ANN001, ANN201
    def with_env(context: Context) -> None:
        if setup:
            setup(context)
        context.env[ENV] = value.format(tmp=context.tmp)

    return with_env


def build(*args: str) -> tuple[str, ...]:
    return ("build", *ONE, "--output-dir", "{tmp}/out", *args)


CASES = [
    Case("build-windows-packages-on-linux", ("build", *ONE, "--target-platform", "win-64", "--output-dir", "{tmp}/out"),
         "--target-platform win-64: its packages build on Windows only (conda-forge's compilers for it run there)"),
    Case("build-output-dir-is-a-file", ("build", *ONE, "--output-dir", "{tmp}/out"), "out is not a directory",
         setup=file("out")),
    Case("build-output-dir-under-a-file", ("build", *ONE, "--output-dir", "{tmp}/out/channel"), "out is not a directory",
         setup=file("out")),
    Case("build-output-dir-read-only", build(), "out is not writable", setup=folder("out", read_only=True)),
    Case("build-output-dir-in-a-read-only-folder", ("build", *ONE, "--output-dir", "{tmp}/ro/out"), "ro is not writable",
         setup=folder("ro", read_only=True)),
    Case("build-ccache-read-only", build(), "cc is not writable", setup=ccache("{tmp}/cc", folder("cc", read_only=True))),
    Case("build-ccache-in-a-read-only-folder", build(), "cc is not writable",
         setup=ccache("{tmp}/cc/ccache", folder("cc", read_only=True))),
    Case("build-ccache-is-a-file", build(), "cc is not a directory", setup=ccache("{tmp}/cc", file("cc"))),
    Case("build-ccache-inside-the-output", build(), "is inside the output channel", setup=ccache("{tmp}/out/ccache")),
    Case("build-channel-refuses", build("-c", "http://127.0.0.1:9/"),
         "cannot read the repodata of http://127.0.0.1:9/", status=1),
    Case("build-channel-not-a-channel", build("-c", "{tmp}/folder"), "folder is not a conda channel",
         setup=folder("folder")),
    Case("build-channel-second-not-a-channel", build("-c", "{tmp}/channel", "-c", "{tmp}/folder"),
         "folder is not a conda channel", setup=lambda c: (folder("folder")(c), channel(c))),
    Case("build-malformed-auth-file", build("-c", "{tmp}/channel"), "auth.json at line 1 column 2: not what rattler's auth",
         setup=lambda c: (channel(c), (c.tmp / "auth.json").write_text("{oops"),
                          c.env.update(RATTLER_AUTH_FILE=f"{c.tmp}/auth.json"))),
    Case("build-channel-missing-folder", build("-c", "{tmp}/nowhere"), "no such channel directory: "),
    Case("build-channel-bad-scheme", build("-c", "ftp://example.org/x"), "channel 'ftp://example.org/x'"),
    Case("build-unknown-cuda", ("build", "--cuda", "11.8"), "unknown CUDA version '11.8'"),
    Case("build-unknown-python", ("build", "--python", "three"), "unknown Python version 'three'"),
    Case("build-unknown-torch", ("build", "--torch", "2"), "unknown pytorch version '2'"),
    Case("build-unknown-arch", ("build", "--cuda", "13.0", "--arch", "9.5"), "unknown architecture '9.5'"),
    Case("build-unknown-generation", ("build", "--cuda", "13.0", "--generation", "sm77"), "sm77"),
    Case("build-unknown-package", ("build", "--package", "numpy"), "invalid choice: 'numpy'"),
    Case("build-unknown-test-mode", ("build", "--test", "gpu"), "invalid choice: 'gpu'"),
    Case("build-unknown-target-platform", ("build", "--target-platform", "osx-arm64"), "invalid choice: 'osx-arm64'"),
]


def channel(context: Context) -> None:
    """An empty indexed channel: a good one beside the bad."""
    for subdir in ("linux-64", "noarch"):
        (context.tmp / "channel" / subdir).mkdir(parents=True)
        (context.tmp / "channel" / subdir / "repodata.json").write_text(f'{{"info": {{"subdir": "{subdir}"}}, "packages": {{}}}}')
