# Stand-in gxx_linux-64 / gxx_linux-aarch64 activation: CXX and CXXFLAGS like conda-forge's, for the wrapped g++.
_tc="${BUILD_PREFIX:-$CONDA_PREFIX}/bin/@HOST@"
_pfx="${PREFIX:-$CONDA_PREFIX}"
export CXX="${_tc}-c++"
export GXX="${_tc}-g++"
export CXX_FOR_BUILD="${BUILD_PREFIX:-$CONDA_PREFIX}/bin/x86_64-conda-linux-gnu-c++"
export CXXFLAGS="-fvisibility-inlines-hidden -fmessage-length=0 @ARCH_FLAGS@ -ftree-vectorize -fPIC -fstack-protector-strong -fno-plt -O2 -ffunction-sections -pipe -isystem ${_pfx}/include"
export DEBUG_CXXFLAGS="-fvisibility-inlines-hidden -fmessage-length=0 @ARCH_FLAGS@ -ftree-vectorize -fPIC -fstack-protector-all -fno-plt -Og -g -Wall -Wextra -fvar-tracking-assignments -ffunction-sections -pipe -isystem ${_pfx}/include"
unset _tc _pfx
