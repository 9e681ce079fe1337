"""The arch checks shared by both packages (shared/tests/arch_tests.py), for causal_conv1d/_C and causal_conv1d_cuda."""

from arch_tests import (  # noqa: F401 (collected here)
    extension,
    test_extension_has_gpu_code,
    test_extension_has_line_tables_only_on_request,
    test_extension_matches_variant_arch_list,
    test_extension_runs_on_this_gpu,
    test_kernels_are_torch_ops,
    test_library_uses_no_python,
)
