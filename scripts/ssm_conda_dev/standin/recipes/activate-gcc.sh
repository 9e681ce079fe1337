# Stand-in gcc_linux-64 / gcc_linux-aarch64 activation: the same variables conda-forge's sets, for the
# wrapped gcc (@HOST@ and @ARCH_FLAGS@ are filled in when the package is built).
_tc="${BUILD_PREFIX:-$CONDA_PREFIX}/bin/@HOST@"
_pfx="${PREFIX:-$CONDA_PREFIX}"
export CONDA_TOOLCHAIN_HOST=@HOST@
export CONDA_TOOLCHAIN_BUILD=x86_64-conda-linux-gnu
export HOST=@HOST@
export BUILD=x86_64-conda-linux-gnu
export CC="${_tc}-cc"
export CPP="${_tc}-cpp"
export GCC="${_tc}-gcc"
export CC_FOR_BUILD="${BUILD_PREFIX:-$CONDA_PREFIX}/bin/x86_64-conda-linux-gnu-cc"
export CONDA_BUILD_SYSROOT="${BUILD_PREFIX:-$CONDA_PREFIX}/@HOST@/sysroot"
export CFLAGS="@ARCH_FLAGS@ -ftree-vectorize -fPIC -fstack-protector-strong -fno-plt -O2 -ffunction-sections -pipe -isystem ${_pfx}/include"
export CPPFLAGS="-DNDEBUG -D_FORTIFY_SOURCE=2 -O2 -isystem ${_pfx}/include"
export LDFLAGS="-Wl,-O2 -Wl,--sort-common -Wl,--as-needed -Wl,-z,relro -Wl,-z,now -Wl,--disable-new-dtags -Wl,--gc-sections -Wl,--allow-shlib-undefined -Wl,-rpath,${_pfx}/lib -Wl,-rpath-link,${_pfx}/lib -L${_pfx}/lib"
export DEBUG_CFLAGS="@ARCH_FLAGS@ -ftree-vectorize -fPIC -fstack-protector-all -fno-plt -Og -g -Wall -Wextra -fvar-tracking-assignments -ffunction-sections -pipe -isystem ${_pfx}/include"
unset _tc _pfx
