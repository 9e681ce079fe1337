"""ssm-conda-dev bench-kernels: bad options before anything runs; without a CUDA GPU, one line and exit 1."""

from tests.bad_input import Case

CASES = [
    Case("bench-kernels-unknown-op", ("bench-kernels", "--ops", "fwd,sideways"), "unknown op 'sideways'; accepted:", dev=True),
    Case("bench-kernels-unknown-dtype", ("bench-kernels", "--dtypes", "int3"), "unknown dtype 'int3'; accepted:", dev=True),
    Case("bench-kernels-unknown-layout", ("bench-kernels", "--layouts", "diag"), "unknown layout 'diag'; accepted:", dev=True),
    Case("bench-kernels-no-repeats", ("bench-kernels", "--repeats", "0"), "--repeats must be at least 1", dev=True),
    Case("bench-kernels-repeats-not-a-number", ("bench-kernels", "--repeats", "many"), "invalid int value: 'many'", dev=True),
    Case("bench-kernels-no-gpu", ("bench-kernels", "--json-file", "{tmp}/b.json"), "bench-kernels needs", status=1, dev=True),
]
