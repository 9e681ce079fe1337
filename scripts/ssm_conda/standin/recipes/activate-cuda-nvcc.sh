# Activation of the stand-in cuda-nvcc_linux-64 (conda-forge's does the same for conda builds):
# the toolkit is the build prefix, headers and libraries of the host prefix come first.
if [ -n "${CONDA_BUILD:-}" ] && [ -n "${BUILD_PREFIX:-}" ]; then
  _cuda_tp="${PREFIX:-$CONDA_PREFIX}/targets/x86_64-linux"
  _cuda_tb="${BUILD_PREFIX}/targets/x86_64-linux"
else
  _cuda_tp="${CONDA_PREFIX}/targets/x86_64-linux"
  _cuda_tb="${CONDA_PREFIX}/targets/x86_64-linux"
fi
export CONDA_BACKUP_CUDA_HOME="${CUDA_HOME:-}"
export CUDA_HOME="${BUILD_PREFIX:-$CONDA_PREFIX}"
export CUDA_PATH="${CUDA_HOME}"
export CFLAGS="${CFLAGS:-} -isystem ${_cuda_tp}/include -isystem ${_cuda_tb}/include"
export CPPFLAGS="${CPPFLAGS:-} -isystem ${_cuda_tp}/include -isystem ${_cuda_tb}/include"
export CXXFLAGS="${CXXFLAGS:-} -isystem ${_cuda_tp}/include -isystem ${_cuda_tb}/include"
export LDFLAGS="${LDFLAGS:-} -L${_cuda_tp}/lib -L${_cuda_tp}/lib/stubs"
# conda-forge sets NVCC_PREPEND_FLAGS=-ccbin=$CXX; torch's cpp_extension adds its own -ccbin
# from $CC, and nvcc refuses two. NVCC_CCBIN is nvcc's default that any -ccbin overrides.
if [ -n "${CXX:-}" ]; then
  export NVCC_CCBIN="${CXX}"
fi
unset _cuda_tp _cuda_tb
