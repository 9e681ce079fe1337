"""ssm-conda plan."""

from tests.bad_input import Case

CASES = [
    Case("plan-unknown-cuda", ("plan", "--cuda", "11.8"), "unknown CUDA version '11.8'"),
    Case("plan-bad-channel", ("plan", "-c", "http//nowhere"), "channel 'http//nowhere'"),
]
