# Installs $WHEEL into the host environment's site-packages and prints that folder: with the host
# python's pip natively; for a cross target (a linux-aarch64 package built on linux-64) with the build
# machine's pip, told the target's platform and Python ($CROSS_PIP_ARGS), as the host's cannot run.
set -euo pipefail
if [ "${CONDA_BUILD_CROSS_COMPILATION:-0}" = 1 ]; then
  sp="$PREFIX/lib/python$PY_VER/site-packages"
  # shellcheck disable=SC2086  # CROSS_PIP_ARGS is a list of options
  "$BUILD_PREFIX/bin/python" -m pip install --no-deps --no-index --no-compile --no-warn-script-location \
    --target "$sp" ${CROSS_PIP_ARGS:-} "$WHEEL" >&2
  rm -rf "$sp/bin"
else
  sp="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  "$PYTHON" -m pip install --no-deps --no-index --no-compile --no-warn-script-location "$WHEEL" >&2
fi
echo "$sp"
