"""Make torch.utils.cpp_extension.include_paths() find the headers where conda-forge's pytorch has
them, as its patch 0006-use-our-own-PREFIX-for-include-paths does: the environment's include/
first (libtorch's headers), and for CUDA the toolkit headers of the environment's
targets/<target>/include instead of $CUDA_HOME/include (x86_64-linux, sbsa-linux for linux-aarch64:
the feedstock's @CUDA_TARGET@).

    python patch_cpp_extension.py .../torch/utils/cpp_extension.py x86_64-linux
"""

import re
import sys
from pathlib import Path

INCLUDE_PATHS = '''def include_paths(device_type: str = "cpu", torch_include_dirs=True) -> list[str]:
    """Include paths for a C++ or CUDA extension: conda-forge's layout (libtorch's headers in the
    environment's include/, CUDA's in its targets/@CUDA_TARGET@/include)."""
    import sysconfig
    lib_include = os.path.join(_TORCH_PATH, 'include')
    conda_include = os.path.join(sysconfig.get_config_var("prefix"), "include")
    paths = [conda_include]
    if torch_include_dirs:
        paths.extend([
            lib_include,
            os.path.join(conda_include, 'torch', 'csrc', 'api', 'include'),
            os.path.join(lib_include, 'torch', 'csrc', 'api', 'include'),
        ])
    if device_type == "cuda":
        cuda_target = os.path.join(os.environ.get("CONDA_PREFIX", ""), "targets", "@CUDA_TARGET@", "include")
        if os.path.exists(os.path.join(cuda_target, "cuda_runtime_api.h")):
            paths.append(cuda_target)
    return paths


'''


def main(path: str, cuda_target: str) -> None:
    source = Path(path).read_text()
    replacement = INCLUDE_PATHS.replace("@CUDA_TARGET@", cuda_target).replace("\\", "\\\\")
    patched, count = re.subn(r"^def include_paths\(.*?(?=^def )", replacement, source, count=1, flags=re.M | re.S)
    if count != 1:
        sys.exit(f"{path}: no include_paths() to patch")
    Path(path).write_text(patched)
    print(f"patched include_paths() in {path}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
