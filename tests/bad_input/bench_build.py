"""ssm-conda-dev bench-build: bad input fails before any build starts (nothing is built)."""

from tests.bad_input import Case, Context

CF = ("--channel", "conda-forge")


def output_dir_is_a_file(context: Context) -> None:
    (context.tmp / "notes.md").write_text("")


def output_dir_not_empty(context: Context) -> None:
    (context.tmp / "kept").mkdir()
    (context.tmp / "kept" / "old.log").write_text("")


CASES = [
    Case("bench-build-no-such-channel", ("bench-build", "cache", "--channel", "/no/such/channel"),
         "no such channel directory: /no/such/channel", dev=True),
    Case("bench-build-python-b", ("bench-build", "cache", *CF, "--python-b", "3"), "unknown Python version '3'", dev=True),
    Case("bench-build-unknown-cuda", ("bench-build", "archs", *CF, "--cuda", "11.8"), "unknown CUDA version '11.8'", dev=True),
    Case("bench-build-unknown-arch", ("bench-build", "archs", *CF, "--arch", "sm_90"), "unknown architecture 'sm_90'",
         dev=True),
    Case("bench-build-generations-of-a-file-without", ("bench-build", "generations", *CF, "--cuda", "12.9"),
         "--cuda 12.9: its variant file does not split by GPU generation", dev=True),
    Case("bench-build-baseline-0", ("bench-build", "generations", *CF, "--baseline-mb", "0"),
         "--baseline-mb 0.0: give the size", dev=True),
    Case("bench-build-unknown-package", ("bench-build", "cache", *CF, "--package", "flash-attn"),
         "ssm-conda-dev bench-build: argument --package", dev=True),
    Case("bench-build-unknown-generation", ("bench-build", "lineinfo", *CF, "--generation", "sm100"),
         "--generation 'sm100': accepted for CUDA 13.0: all, sm8x, sm90, sm10x, sm12x", dev=True),
    Case("bench-build-two-benchmarks-one-bad", ("bench-build", "generations", "lineinfo", *CF, "--cuda", "12.9"),
         "--cuda 12.9: its variant file does not split by GPU generation", dev=True),
    Case("bench-build-output-dir-a-file", ("bench-build", "lineinfo", *CF, "--output-dir", "{tmp}/notes.md"),
         "notes.md: not an empty directory", dev=True, setup=output_dir_is_a_file),
    Case("bench-build-output-dir-not-empty", ("bench-build", "lineinfo", *CF, "--output-dir", "{tmp}/kept"),
         "kept: not an empty directory", dev=True, setup=output_dir_not_empty),
]
