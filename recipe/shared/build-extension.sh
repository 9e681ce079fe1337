#!/usr/bin/env bash
# The build script of every package in recipe/: a PyTorch CUDA extension pip-installed from its
# patched sdist. What differs per package comes from its recipe's script env.
set -euxo pipefail

# The CUDA toolkit of the build environment (cuda-nvcc), never a system one.
export CUDA_HOME="${BUILD_PREFIX}"
# TORCH_CUDA_ARCH_LIST comes from the variant (cuda_arch_list); each package's patches make its
# setup.py obey it.
: "${TORCH_CUDA_ARCH_LIST:?set by the recipe from the variant key cuda_arch_list}"

# Parallelism from what this build may use: one nvcc process peaks near 2 GB per thread (measured:
# 3.4 GB for two sm_90 jobs), and ninja runs MAX_JOBS of them, no more than there are sources to
# compile (causal-conv1d has 4, mamba-ssm 10). CPUs and
# memory are the machine's, or fewer where the cgroup of a container or a batch job (v2 or v1) caps
# them: OOM kills come from the cap, not from the machine running out.
# SSM_CONDA_PROBE_ROOT, set only by tests, reads /proc and /sys/fs/cgroup under a fake root.
{ set +x; } 2>/dev/null  # the probe's trace would fill the log; its result is printed below
probe="${SSM_CONDA_PROBE_ROOT:-}"
cpus="${CPU_COUNT:-$(nproc)}"
mem_kb=$(awk '/^MemAvailable:/ { print $2 }' "${probe}/proc/meminfo")
# This process's cgroup directory for controller $1 ("" for the v2 hierarchy) mounted at $2, then
# its ancestors: a Slurm job's limit sits on the job's cgroup, above the step's.
cgroup_dirs() {
  local dir
  dir=$(awk -F: -v c="$1" '(c == "" && $2 == "") || (c != "" && index("," $2 ",", "," c ",")) { print $3; exit }' \
    "${probe}/proc/self/cgroup" 2>/dev/null) || return 0
  [[ -n "${dir}" && -d "$2" ]] || return 0
  dir="$2${dir%/}"
  while [[ "${dir}" == "$2"* ]]; do
    echo "${dir}"
    [[ "${dir}" != "$2" ]] || break
    dir="${dir%/*}"
  done
}
# A limit in bytes, a CPU quota and period: "max" (v2), -1 and v1's near-2^63 "unlimited" change nothing.
limit_memory() {
  if [[ "$1" =~ ^[0-9]{1,18}$ ]] && (( $1 / 1024 < mem_kb )); then mem_kb=$(( $1 / 1024 )); fi
}
limit_cpus() {
  if [[ "${1:-}" =~ ^[0-9]+$ && "${2:-}" =~ ^[1-9][0-9]*$ ]] && (( ($1 + $2 - 1) / $2 < cpus )); then
    cpus=$(( ($1 + $2 - 1) / $2 ))
  fi
}
value() { cat "$1" 2>/dev/null || true; }
cgroup="${probe}/sys/fs/cgroup"
while read -r dir; do
  limit_memory "$(value "${dir}/memory.max")"
  read -r quota period <<<"$(value "${dir}/cpu.max")"
  limit_cpus "${quota}" "${period}"
done < <(cgroup_dirs "" "${cgroup}")
while read -r dir; do
  limit_memory "$(value "${dir}/memory.limit_in_bytes")"
done < <(cgroup_dirs memory "${cgroup}/memory")
while read -r dir; do
  limit_cpus "$(value "${dir}/cpu.cfs_quota_us")" "$(value "${dir}/cpu.cfs_period_us")"
done < <(cgroup_dirs cpu "${cgroup}/cpu")
mem_gb=$(( mem_kb / 1048576 ))
slots=$(( mem_gb * 3 / 4 / 2 ))
(( slots >= 1 )) || slots=1
jobs=$(( cpus < slots ? cpus : slots ))
sources=$(find . \( -name '*.cu' -o -name '*.cpp' \) -not -path './build/*' | wc -l)
(( sources >= 1 )) || sources=4
(( jobs <= sources )) || jobs="${sources}"
# A caller's MAX_JOBS sizes the threads per job.
[[ ! "${MAX_JOBS:-}" =~ ^[1-9][0-9]*$ ]] || jobs="${MAX_JOBS}"
threads=$(( cpus / jobs < slots / jobs ? cpus / jobs : slots / jobs ))
(( threads >= 1 )) || threads=1
export MAX_JOBS="${MAX_JOBS:-${jobs}}"
export NVCC_THREADS="${NVCC_THREADS:-${threads}}"
echo "building with MAX_JOBS=${MAX_JOBS} NVCC_THREADS=${NVCC_THREADS} (${cpus} CPUs, ${mem_gb} GB usable)"
set -x

# torch >= 2.14 wraps the compilers in any ccache/sccache found on PATH (a machine's own, too);
# the cache is used only as configured below.
export TORCH_NO_COMPILER_WRAPPER=1

# The nvcc command torch's ninja file runs (PYTORCH_NVCC), so its options are on the command line
# that a compiler cache hashes. Fatbins are compressed for size wherever this nvcc has the option
# (CUDA 12.8+), as conda-forge's pytorch does on CUDA 13.0: the objects shrink by about a third.
nvcc_command="nvcc"
nvcc_help=$(nvcc --help)
if grep -q -- '--compress-mode' <<<"${nvcc_help}"; then
  nvcc_command+=" --compress-mode=size"
fi
# Reproducible objects: nvcc names its temporary files after its process id and embeds the names;
# beside the object file they take the object's name instead. Some internal symbols carry a
# random number too (measured: the process id again); a seed replaces it. One seed for every
# file is safe here: those symbols also carry the file's name, and nothing is linked across files
# on the device (no -rdc).
if grep -q -- '--objdir-as-tempdir' <<<"${nvcc_help}"; then
  nvcc_command+=" --objdir-as-tempdir"
fi
if grep -q -- '--frandom-seed' <<<"${nvcc_help}"; then
  nvcc_command+=" --frandom-seed=${PKG_NAME}"
fi

# Reproducible packages: every time recorded is the source's (the sdist's PKG-INFO), not the build's.
# rattler-build sets SOURCE_DATE_EPOCH to its build time; Python then writes .pyc files that carry a
# hash of their source instead of its time. `ssm-conda build` reads the file written here and gives
# the archive the same time.
SOURCE_DATE_EPOCH=$(stat -c %Y PKG-INFO)
export SOURCE_DATE_EPOCH
build_root="$(dirname "${SRC_DIR}")"
echo "${SOURCE_DATE_EPOCH}" > "${build_root}/source-date-epoch"
# conda-forge's libtorch installs torch's headers in $PREFIX/include, a path that names no Python,
# so the sources (none includes Python.h: the C++ file registers torch ops, patches 0007/0008) of
# variants that differ only in Python preprocess to the same text and share their objects in a
# compiler cache. A pytorch that keeps them in the Python-versioned site-packages
# (PyPI's layout) is reached through a link whose path names no Python, for the same effect.
if [[ -d "${SP_DIR}/torch/include/torch" ]]; then
  ln -sfn "${SP_DIR}/torch/include" "${build_root}/torch-include"
  trap 'rm -f "${build_root}/torch-include"' EXIT
  nvcc_command+=" -I${build_root}/torch-include -I${build_root}/torch-include/torch/csrc/api/include"
fi
# nvcc's own include path is absolute ($BUILD_PREFIX/bin/../targets/...), so __FILE__ in the CUDA
# headers' asserts would name the build directory. Mapped away through the environment, which a
# compiler cache does not hash (the map's effect on the preprocessed text, it does), with or without one.
export NVCC_APPEND_FLAGS="${NVCC_APPEND_FLAGS:-} -Xcompiler=-fmacro-prefix-map=${build_root}/="

# Optional compiler cache, kept outside the output channel: `ssm-conda build` points
# SSM_CONDA_CCACHE_DIR at it (--no-cache leaves it empty). `ssm-conda build` builds every package
# in one build folder, so variants built later (a rebuild after a recipe change, another Python)
# reuse the CUDA objects. No CCACHE_BASEDIR: ccache would hand the compiler relative paths, which
# end up in __FILE__, and a build with the cache would differ from one without.
if [[ -n "${SSM_CONDA_CCACHE_DIR:-}" ]]; then
  command -v ccache >/dev/null || { echo "SSM_CONDA_CCACHE_DIR is set but ccache is missing" >&2; exit 1; }
  export CCACHE_DIR="${SSM_CONDA_CCACHE_DIR}"
  export CCACHE_NOHASHDIR=1
  export CCACHE_COMPILERCHECK=content
  # Environment files are hard links into the package cache, so creating or removing any other
  # environment (another build, a test prefix) moves their ctime; ccache would take that for a
  # header edited mid-compile, compile again and store nothing. Their content and mtime still count.
  export CCACHE_SLOPPINESS=include_file_ctime
  nvcc_command="ccache ${nvcc_command}"
  # ccache masquerading as the C++ compiler keeps the name torch's ABI check expects. In the build
  # folder, not /tmp: it goes with the build, and the compiler's path is the same in every build.
  ccache_bin="${build_root}/ccache-bin"
  mkdir -p "${ccache_bin}"
  ln -sf "$(command -v ccache)" "${ccache_bin}/$(basename "${CXX}")"
  export CXX="${ccache_bin}/$(basename "${CXX}")"
  ccache --zero-stats >/dev/null
fi

export PYTORCH_NVCC="${nvcc_command}"
"${PYTHON}" -m pip install . -vv --no-deps --no-build-isolation --no-index
# pip records the build's work directory as where the package came from; a conda package has no
# such source, and the path would leak into the package.
rm -f "${SP_DIR}/${PKG_NAME//-/_}"-*.dist-info/direct_url.json

if [[ -n "${SSM_CONDA_CCACHE_DIR:-}" ]]; then
  # Verbose: a compile that ccache could not cache is counted under its reason.
  ccache --show-stats --verbose
fi
