"""ssm-conda plan: it reads only the recipes and variants/ (no channel is asked), so only those inputs can be bad."""

from tests.bad_input import Case

CASES = [
    Case("plan-unknown-cuda", ("plan", "--cuda", "11.8"), "unknown CUDA version '11.8'"),
    Case("plan-bad-channel", ("plan", "-c", "http//nowhere"), "channel 'http//nowhere'"),
    Case("plan-missing-channel-folder", ("plan", "-c", "{tmp}/nowhere"), "no such channel directory: "),
    Case("plan-unknown-python", ("plan", "--python", "three"), "unknown Python version 'three'"),
    Case("plan-unknown-torch", ("plan", "--torch", "2"), "unknown pytorch version '2'"),
    Case("plan-unknown-arch", ("plan", "--cuda", "13.0", "--arch", "9.5"), "unknown architecture '9.5'"),
    Case("plan-unknown-generation", ("plan", "--cuda", "13.0", "--generation", "sm77"), "sm77"),
    Case("plan-generation-no-file-lists", ("plan", "--generation", "sm77"),
         "unknown GPU generation 'sm77'; accepted: all, sm8x, sm90, sm10x, sm12x"),
    Case("plan-generation-not-in-the-cuda-file", ("plan", "--cuda", "12.9", "--generation", "sm90"),
         "unknown GPU generation of variants/cuda129.yaml 'sm90'; accepted: all"),
    Case("plan-unknown-package", ("plan", "--package", "numpy"), "invalid choice: 'numpy'"),
    Case("plan-unknown-target-platform", ("plan", "--target-platform", "osx-arm64"), "invalid choice: 'osx-arm64'"),
    Case("plan-build-option", ("plan", "--output-dir", "out"), "unrecognized arguments: --output-dir out"),
    Case("plan-write-variants-to-a-folder", ("plan", "--cuda", "13.0", "--write-variants", "{tmp}"), "name a file in"),
    Case("plan-write-variants-into-no-folder", ("plan", "--cuda", "13.0", "--write-variants", "{tmp}/no/such.yaml"),
         "name a file in an existing folder"),
    Case("plan-write-variants-into-a-read-only-folder", ("plan", "--cuda", "13.0", "--write-variants", "{tmp}/ro/sel.yaml"),
         "sel.yaml: cannot write it (Read-only file system)",
         setup=lambda c: ((c.tmp / "ro").mkdir(), c.read_only(c.tmp / "ro"))),
]
