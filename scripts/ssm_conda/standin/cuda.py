"""conda-forge's CUDA packages, as far as the build uses them, made from NVIDIA's PyPI wheels.

Each package takes the files its conda-forge recipe ships (the feedstock and commit are in
conda_forge.yaml, which the fidelity check compares the built packages with): the real libraries
and headers under targets/x86_64-linux in the noarch `_linux-64` packages, the lib/ and bin/
symlinks into them in the per-platform ones, nvcc's tools and nvvm beside them. The wheels' files
sit under nvidia/cu13/ (`root` in install-cuda-files.sh); `copy` maps a path there to a path in the
prefix ("/." copies a folder's contents), `links` a symlink in the prefix to its target.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TARGET = "targets/x86_64-linux"


@dataclass(frozen=True)
class CudaPackage:
    name: str
    wheel: str | None  # CUDA_TOOLKIT_WHEELS key its files and version come from; None: no files of its own
    noarch: bool = False
    copy: dict[str, str] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    recipe_files: dict[str, str] = field(default_factory=dict)  # a file beside the recipe -> where it goes
    run: tuple[str, ...] = ()  # besides cuda-version's pin; {v} is this package's version
    constrains: tuple[str, ...] = ()
    run_exports_weak: tuple[str, ...] = ()
    run_exports_strong: tuple[str, ...] = ()
    version_from: str | None = None  # the wheel whose version it has, where it has no files


GCC_IMPL = "gcc_impl_linux-64 >=6,<16.0a0"
CUDA_VERSION_STRONG = "cuda-version >={cuda},<{cuda_major_next}.0a0"
CUDART_WEAK = "cuda-cudart >={v},<{cuda_major_next}.0a0"

CUDA_PACKAGES: tuple[CudaPackage, ...] = (
    # cuda-cudart-feedstock: the runtime library, its static libraries and headers
    CudaPackage("cuda-cudart_linux-64", "runtime", noarch=True,
                copy={"lib/libcudart.so.{cuda_major}": f"{TARGET}/lib/libcudart.so.{{v}}"},
                links={f"{TARGET}/lib/libcudart.so.{{cuda_major}}": "libcudart.so.{v}"}),
    CudaPackage("cuda-cudart", "runtime",
                links={"lib/libcudart.so.{cuda_major}": f"../{TARGET}/lib/libcudart.so.{{cuda_major}}",
                       "lib/libcudart.so.{v}": f"../{TARGET}/lib/libcudart.so.{{v}}"},
                run=("cuda-cudart_linux-64 =={v}",)),
    CudaPackage("cuda-cudart-static_linux-64", "runtime", noarch=True,
                copy={"lib/libcudart_static.a": f"{TARGET}/lib/libcudart_static.a",
                      "lib/libcudadevrt.a": f"{TARGET}/lib/libcudadevrt.a"}),
    CudaPackage("cuda-cudart-static", "runtime",
                links={"lib/libcudart_static.a": f"../{TARGET}/lib/libcudart_static.a",
                       "lib/libcudadevrt.a": f"../{TARGET}/lib/libcudadevrt.a"},
                run=("cuda-cudart-static_linux-64 =={v}",)),
    # cuda-cccl-feedstock: CCCL's headers (nvcc.profile puts include/cccl on the system path)
    CudaPackage("cuda-cccl_linux-64", "cccl", noarch=True,
                copy={"include/.": f"{TARGET}/include", "lib/cmake": f"{TARGET}/lib/cmake"}),
    CudaPackage("cuda-cudart-dev_linux-64", "runtime", noarch=True,
                copy={"include/.": f"{TARGET}/include"},
                links={f"{TARGET}/lib/libcudart.so": "libcudart.so.{cuda_major}"},
                run=("cuda-cudart-static_linux-64", "cuda-cccl_linux-64", "cuda-cudart_linux-64"),
                run_exports_weak=(CUDART_WEAK,)),
    CudaPackage("cuda-cudart-dev", "runtime",
                links={"lib/libcudart.so": f"../{TARGET}/lib/libcudart.so"},
                run=("cuda-cudart =={v}", "cuda-cudart-dev_linux-64 =={v}", "cuda-cudart-static =={v}"),
                run_exports_weak=(CUDART_WEAK,)),
    # cuda-nvcc-impl-feedstock: crt, nvvm and nvcc's tools; cuda-nvcc-feedstock: the activation
    CudaPackage("cuda-crt-dev_linux-64", "crt", noarch=True, copy={"include/crt": f"{TARGET}/include/crt"},
                run_exports_strong=(CUDA_VERSION_STRONG,)),
    CudaPackage("cuda-crt-tools", "nvcc", copy={"bin/crt": "bin/crt"}),
    CudaPackage("cuda-nvvm-tools", "nvvm", copy={"nvvm/bin": "nvvm/bin", "nvvm/libdevice": "nvvm/libdevice"}),
    CudaPackage("cuda-nvvm-impl", "nvvm",
                copy={"include/nvvm.h": "nvvm/include/nvvm.h", "lib/libnvvm.so.4": "nvvm/lib64/libnvvm.so.4"},
                links={"nvvm/lib64/libnvvm.so": "libnvvm.so.4"}),
    CudaPackage("cuda-nvvm-dev_linux-64", "nvvm", noarch=True, links={f"{TARGET}/nvvm": "../../nvvm"}),
    CudaPackage("cuda-nvcc-tools", "nvcc",
                copy={f"bin/{tool}": f"bin/{tool}"
                      for tool in ("nvcc", "ptxas", "fatbinary", "nvlink", "cudafe++", "bin2c", "__nvcc_device_query")},
                # conda-forge's nvcc.profile.patch: the toolkit is targets/x86_64-linux of nvcc's prefix
                recipe_files={"nvcc.profile": "bin/nvcc.profile"},
                run=("cuda-crt-tools =={v}", "cuda-nvvm-tools =={v}"), constrains=(GCC_IMPL,)),
    CudaPackage("cuda-nvcc-dev_linux-64", "nvcc", noarch=True,
                copy={"include/fatbinary_section.h": f"{TARGET}/include/fatbinary_section.h"},
                links={f"{TARGET}/bin/nvcc": "../../../bin/nvcc"},
                run=("cuda-crt-dev_linux-64 =={v}", "cuda-nvvm-dev_linux-64 =={v}", "libgcc >=6"),
                constrains=(GCC_IMPL,), run_exports_strong=(CUDA_VERSION_STRONG,)),
    CudaPackage("cuda-nvcc-impl", None, version_from="nvcc",
                run=("cuda-nvcc-tools =={v}", "cuda-nvcc-dev_linux-64 =={v}", "cuda-nvvm-impl =={v}", "cuda-cudart-dev"),
                constrains=(GCC_IMPL,), run_exports_strong=(CUDA_VERSION_STRONG,)),
)
