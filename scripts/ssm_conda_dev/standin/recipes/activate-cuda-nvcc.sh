# Activation of the stand-in cuda-nvcc_<target>: what conda-forge's (cuda-nvcc-feedstock
# recipe/activate.sh) sets. It leaves CUDA_HOME alone.
_cuda_targets="@TARGET_DIR@"
if [ "${CONDA_BUILD:-0}" = "1" ]; then
  _cuda_cflags="-I${PREFIX}/${_cuda_targets}/include -I${PREFIX}/${_cuda_targets}/include/cccl -I${BUILD_PREFIX}/${_cuda_targets}/include -I${BUILD_PREFIX}/${_cuda_targets}/include/cccl"
  _cuda_ldflags="-L${PREFIX}/${_cuda_targets}/lib -L${PREFIX}/${_cuda_targets}/lib/stubs -L${BUILD_PREFIX}/${_cuda_targets}/lib -L${BUILD_PREFIX}/${_cuda_targets}/lib/stubs"
else
  _cuda_cflags="-I${CONDA_PREFIX}/${_cuda_targets}/include -I${CONDA_PREFIX}/${_cuda_targets}/include/cccl"
  _cuda_ldflags="-L${CONDA_PREFIX}/${_cuda_targets}/lib -L${CONDA_PREFIX}/${_cuda_targets}/lib/stubs"
fi
export CFLAGS="${CFLAGS:-} ${_cuda_cflags}"
export CPPFLAGS="${CPPFLAGS:-} ${_cuda_cflags}"
export CXXFLAGS="${CXXFLAGS:-} ${_cuda_cflags}"
export LDFLAGS="${LDFLAGS:-} ${_cuda_ldflags}"
export NVCC_PREPEND_FLAGS_BACKUP="${NVCC_PREPEND_FLAGS:-UNSET}"
export NVCC_PREPEND_FLAGS="${NVCC_PREPEND_FLAGS:-} -ccbin=${CXX}"
if [ "${CONDA_BUILD:-0}" = "1" ]; then
  export NVCC_APPEND_FLAGS="${NVCC_APPEND_FLAGS:-} -I${PREFIX}/${_cuda_targets}/include -L${PREFIX}/${_cuda_targets}/lib -L${PREFIX}/${_cuda_targets}/lib/stubs"
fi
unset _cuda_targets _cuda_cflags _cuda_ldflags
