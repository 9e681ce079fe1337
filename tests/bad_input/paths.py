"""Paths the system refuses, on every command that takes one: longer than 4096 characters or with a name over 255
(ENAMETOOLONG from the first stat), a ~USER naming no user, and file names holding terminal control bytes (shown
escaped, on one line, never obeyed)."""

from __future__ import annotations

from tests.bad_input import Case, Context

LONG_NAME = "n" * 300  # one name over 255
LONG_PATH = "/".join(["d" * 200] * 21)  # 4220 characters, each name short
TOO_LONG = "is too long ({} characters; the limit is 4096, 255 per name)"
SHOWN = "d" * 60 + "... " + TOO_LONG.format(len(LONG_PATH))  # the first 60 characters, then "..."
PLAN = ("plan", "--cuda", "13.0", "--python", "3.12", "--torch", "2.13", "--generation", "sm90", "--package", "causal-conv1d")
BUILD = ("build", *PLAN[1:])
HOSTILE = "evil\x1b[2Jname\nsecond line\x7f\x9b.conda"  # clears the screen, starts a line, DEL, C1's CSI


def env(name: str, value: str):  # noqa: ANN201
    def setup(context: Context) -> None:
        context.env[name] = value.format(tmp=context.tmp)

    return setup


def hostile_file(context: Context) -> None:
    (context.tmp / HOSTILE.replace(".conda", ".whl")).write_text("")


CASES = [
    Case("verify-package-name-too-long", ("verify", f"{LONG_NAME}.conda"),
         f"package {LONG_NAME[:60]}... {TOO_LONG.format(306)}"),
    Case("verify-package-path-too-long", ("verify", LONG_PATH), f"package {SHOWN}"),
    Case("gpu-test-package-path-too-long", ("gpu-test", LONG_PATH), f"package {SHOWN}", dev=True),
    Case("build-output-dir-too-long", (*BUILD, "--output-dir", LONG_PATH), f"--output-dir {SHOWN}"),
    Case("build-output-dir-name-too-long", (*BUILD, "--output-dir", f"{{tmp}}/{LONG_NAME}"),
         "characters; the limit is 4096, 255 per name)"),
    Case("plan-write-variants-too-long", (*PLAN, "--write-variants", LONG_PATH), f"--write-variants {SHOWN}"),
    Case("plan-write-variants-name-too-long", (*PLAN, "--write-variants", f"{LONG_NAME}.yaml"),
         f"--write-variants {LONG_NAME[:60]}... {TOO_LONG.format(305)}"),
    Case("plan-variants-dir-too-long", (*PLAN, "--variants-dir", LONG_PATH), f"--variants-dir {SHOWN}"),
    Case("plan-workspace-too-long", ("--workspace", LONG_PATH, *PLAN), f"--workspace {SHOWN}"),
    Case("plan-workspace-variable-too-long", PLAN, f"SSM_CONDA_WORKSPACE {SHOWN}", setup=env("SSM_CONDA_WORKSPACE", LONG_PATH)),
    Case("plan-workspace-variable-not-a-checkout", PLAN, "SSM_CONDA_WORKSPACE .: not a causal-conv1d-conda checkout",
         setup=env("SSM_CONDA_WORKSPACE", ".")),
    Case("plan-workspace-unknown-user", ("--workspace", "~nobody_here/ws", *PLAN),
         "--workspace ~nobody_here/ws: no user 'nobody_here'"),
    Case("build-compiler-cache-variable-too-long", BUILD, f"SSM_CONDA_CCACHE_DIR /{LONG_PATH[:59]}... {TOO_LONG.format(4221)}",
         setup=env("SSM_CONDA_CCACHE_DIR", f"/{LONG_PATH}")),
    Case("build-channel-too-long", (*BUILD, "-c", LONG_PATH), f"channel {SHOWN}"),
    Case("plan-channel-name-too-long", (*PLAN, "-c", f"./{LONG_NAME}"), f"channel ./{LONG_NAME[:58]}..."),
    Case("plan-channel-file-url-too-long", (*PLAN, "-c", f"file:///{LONG_PATH}"), f"channel /{LONG_PATH[:59]}..."),
    Case("build-channel-unknown-user", (*BUILD, "-c", "~nobody_here/chan"),
         "channel ~nobody_here/chan: no user 'nobody_here' here; accepted: a path, "),
    Case("plan-channel-unknown-user", (*PLAN, "-c", "~nobody_here/chan"), "channel ~nobody_here/chan: no user 'nobody_here'"),
    Case("doctor-interpreter-too-long", ("doctor", "--no-import", "--interpreter", LONG_PATH), f"--interpreter {SHOWN}"),
    Case("doctor-channel-too-long", ("doctor", "--no-import", "-c", LONG_PATH), f"channel {SHOWN}"),
    # control bytes in a file name come out escaped: the error stays one line and the screen is not cleared
    Case("verify-control-bytes-in-a-missing-file", ("verify", HOSTILE),
         "no such file or directory: evil\\x1b[2Jname\\nsecond line\\x7f\\x9b.conda"),
    Case("gpu-test-control-bytes-in-a-file-name", ("gpu-test", HOSTILE.replace(".conda", ".whl")),
         "not a conda package: evil\\x1b[2Jname\\nsecond line\\x7f\\x9b.whl", setup=hostile_file, dev=True),
    Case("plan-control-bytes-in-a-channel", (*PLAN, "-c", "./\x1b]0;pwned\x07"),
         "no such channel directory: ./\\x1b]0;pwned\\x07"),
]
