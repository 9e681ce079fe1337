"""conda-forge's CUDA packages, as far as the build uses them, made from NVIDIA's PyPI wheels.

Each package takes the files its conda-forge recipe ships (the feedstock and commit are in
conda_forge.yaml, which the fidelity check compares the built packages with): the real libraries
and headers under targets/x86_64-linux (sbsa-linux for linux-aarch64) in the noarch `_<platform>`
packages, the lib/ and bin/
symlinks into them in the per-platform ones, nvcc's tools and nvvm beside them. The wheels' files
sit under nvidia/cu13/ (`root` in install-cuda-files.sh); `copy` maps a path there to a path in the
prefix ("/." copies a folder's contents), `links` a symlink in the prefix to its target.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# conda's platform -> where its CUDA files lie (conda-forge's targets/<dir>; sbsa: server aarch64)
TARGETS = {"linux-64": "targets/x86_64-linux", "linux-aarch64": "targets/sbsa-linux"}


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
    tool: bool = False  # runs on the build machine (nvcc and what it runs): not made for a cross target


CUDA_VERSION_STRONG = "cuda-version >={cuda},<{cuda_major_next}.0a0"
CUDART_WEAK = "cuda-cudart >={v},<{cuda_major_next}.0a0"


def cuda_packages(platform: str = "linux-64") -> tuple[CudaPackage, ...]:
    """conda-forge's CUDA packages for `platform`; for linux-aarch64, the target's side of a cross
    build (headers, libraries, their symlinks), not the build machine's tools."""
    target, sub = TARGETS[platform], platform
    gcc_impl = f"gcc_impl_{sub} >=6,<16.0a0"
    packages = (
        # cuda-cudart-feedstock: the runtime library, its static libraries and headers
        CudaPackage(f"cuda-cudart_{sub}", "runtime", noarch=True,
                    copy={"lib/libcudart.so.{cuda_major}": f"{target}/lib/libcudart.so.{{v}}"},
                    links={f"{target}/lib/libcudart.so.{{cuda_major}}": "libcudart.so.{v}"}),
        CudaPackage("cuda-cudart", "runtime",
                    links={"lib/libcudart.so.{cuda_major}": f"../{target}/lib/libcudart.so.{{cuda_major}}",
                           "lib/libcudart.so.{v}": f"../{target}/lib/libcudart.so.{{v}}"},
                    run=(f"cuda-cudart_{sub} =={{v}}",)),
        CudaPackage(f"cuda-cudart-static_{sub}", "runtime", noarch=True,
                    copy={"lib/libcudart_static.a": f"{target}/lib/libcudart_static.a",
                          "lib/libcudadevrt.a": f"{target}/lib/libcudadevrt.a"}),
        CudaPackage("cuda-cudart-static", "runtime",
                    links={"lib/libcudart_static.a": f"../{target}/lib/libcudart_static.a",
                           "lib/libcudadevrt.a": f"../{target}/lib/libcudadevrt.a"},
                    run=(f"cuda-cudart-static_{sub} =={{v}}",)),
        # cuda-cccl-feedstock: CCCL's headers (nvcc.profile puts include/cccl on the system path)
        CudaPackage(f"cuda-cccl_{sub}", "cccl", noarch=True,
                    copy={"include/.": f"{target}/include", "lib/cmake": f"{target}/lib/cmake"}),
        CudaPackage(f"cuda-cudart-dev_{sub}", "runtime", noarch=True,
                    copy={"include/.": f"{target}/include"},
                    links={f"{target}/lib/libcudart.so": "libcudart.so.{cuda_major}"},
                    run=(f"cuda-cudart-static_{sub}", f"cuda-cccl_{sub}", f"cuda-cudart_{sub}"),
                    run_exports_weak=(CUDART_WEAK,)),
        CudaPackage("cuda-cudart-dev", "runtime",
                    links={"lib/libcudart.so": f"../{target}/lib/libcudart.so"},
                    run=("cuda-cudart =={v}", f"cuda-cudart-dev_{sub} =={{v}}", "cuda-cudart-static =={v}"),
                    run_exports_weak=(CUDART_WEAK,)),
        # cuda-nvcc-impl-feedstock: crt, nvvm and nvcc's tools; cuda-nvcc-feedstock: the activation
        CudaPackage(f"cuda-crt-dev_{sub}", "crt", noarch=True, copy={"include/crt": f"{target}/include/crt"},
                    run_exports_strong=(CUDA_VERSION_STRONG,)),
        CudaPackage("cuda-crt-tools", tool=True, wheel="nvcc", copy={"bin/crt": "bin/crt"}),
        CudaPackage("cuda-nvvm-tools", tool=True, wheel="nvvm",
                    copy={"nvvm/bin": "nvvm/bin", "nvvm/libdevice": "nvvm/libdevice"}),
        CudaPackage("cuda-nvvm-impl", tool=True, wheel="nvvm",
                    copy={"include/nvvm.h": "nvvm/include/nvvm.h", "lib/libnvvm.so.4": "nvvm/lib64/libnvvm.so.4"},
                    links={"nvvm/lib64/libnvvm.so": "libnvvm.so.4"}),
        CudaPackage(f"cuda-nvvm-dev_{sub}", "nvvm", noarch=True, links={f"{target}/nvvm": "../../nvvm"}),
        CudaPackage("cuda-nvcc-tools", tool=True, wheel="nvcc",
                    copy={f"bin/{tool}": f"bin/{tool}"
                          for tool in ("nvcc", "ptxas", "fatbinary", "nvlink", "cudafe++", "bin2c", "__nvcc_device_query")},
                    # conda-forge's nvcc.profile.patch: the toolkit is targets/x86_64-linux of nvcc's prefix
                    recipe_files={"nvcc.profile": "bin/nvcc.profile"},
                    run=("cuda-crt-tools =={v}", "cuda-nvvm-tools =={v}"), constrains=(gcc_impl,)),
        CudaPackage(f"cuda-nvcc-dev_{sub}", "nvcc", noarch=True,
                    copy={"include/fatbinary_section.h": f"{target}/include/fatbinary_section.h"},
                    links={f"{target}/bin/nvcc": "../../../bin/nvcc"},
                    run=(f"cuda-crt-dev_{sub} =={{v}}", f"cuda-nvvm-dev_{sub} =={{v}}", "libgcc >=6"),
                    constrains=(gcc_impl,), run_exports_strong=(CUDA_VERSION_STRONG,)),
        CudaPackage("cuda-nvcc-impl", None, version_from="nvcc", tool=True,
                    run=("cuda-nvcc-tools =={v}", f"cuda-nvcc-dev_{sub} =={{v}}", "cuda-nvvm-impl =={v}", "cuda-cudart-dev"),
                    constrains=(gcc_impl,), run_exports_strong=(CUDA_VERSION_STRONG,)),
    )
    return tuple(p for p in packages if platform == "linux-64" or not p.tool)


CUDA_PACKAGES = cuda_packages()
