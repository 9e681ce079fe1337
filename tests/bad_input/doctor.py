"""ssm-conda doctor: variant files it cannot read (as ci-matrix), a --channel that is no channel (it is printed
into commands to paste), and a CONDA_OVERRIDE_CUDA that is no CUDA version (its advice would compare it)."""

from tests.bad_input import Case
from tests.bad_input.ci_matrix import variant_file_cases

DOCTOR = ("doctor", "--no-import")
CASES = [
    *variant_file_cases(DOCTOR),
    Case("doctor-channel-shell", (*DOCTOR, "--channel", "mamba-kernels; rm -rf ~"), "channel 'mamba-kernels; rm -rf ~'"),
    Case("doctor-channel-missing-dir", (*DOCTOR, "--channel", "{tmp}/my out"), "no such channel directory"),
    Case("doctor-channel-bad-url", (*DOCTOR, "--channel", "http//nowhere"), "channel 'http//nowhere'"),
    Case("doctor-cuda-override-not-a-version", DOCTOR, "CONDA_OVERRIDE_CUDA=garbage is not a CUDA version; accepted: ",
         setup=lambda c: c.env.update(CONDA_OVERRIDE_CUDA="garbage")),
]
