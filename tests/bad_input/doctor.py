"""ssm-conda doctor: variant files it cannot read (as ci-matrix), and a --channel that is no channel (it is printed
into commands to paste)."""

from tests.bad_input import Case
from tests.bad_input.ci_matrix import variant_file_cases

DOCTOR = ("doctor", "--no-import")
CASES = [
    *variant_file_cases(DOCTOR),
    Case("doctor-channel-shell", (*DOCTOR, "--channel", "mamba-kernels; rm -rf ~"), "channel 'mamba-kernels; rm -rf ~'"),
    Case("doctor-channel-missing-dir", (*DOCTOR, "--channel", "{tmp}/my out"), "no such channel directory"),
    Case("doctor-channel-bad-url", (*DOCTOR, "--channel", "http//nowhere"), "channel 'http//nowhere'"),
]
