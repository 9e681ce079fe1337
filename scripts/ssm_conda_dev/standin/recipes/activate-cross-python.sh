# Stand-in cross-python_@TARGET@ activation: conda-forge's (cross-python-feedstock
# recipe/activate-cross-python.sh) for CPython, with find and cp where it uses rsync.
if [[ "${CONDA_BUILD:-0}" == "1" && "${CONDA_BUILD_STATE:-}" != "TEST" ]]; then
  echo "Setting up cross-python"
  sysconfigdata_fn="$PREFIX/lib/python@PY_VER@/@SYSCONFIGDATA_NAME@.py"
  find "$PREFIX/lib/" -name "_sysconfigdata*.py" -not -name "$(basename "$sysconfigdata_fn")" -type f -exec rm -f {} +
  export PYO3_CROSS_LIB_DIR=$PREFIX/lib/python@PY_VER@
  export PYO3_CROSS_PYTHON_IMPLEMENTATION=CPython
  export PYO3_CROSS_INCLUDE_DIR=$PREFIX/include
  export PYO3_CROSS_PYTHON_VERSION=@PY_VER@
  unset _CONDA_PYTHON_SYSCONFIGDATA_NAME
  if [[ ! -d $BUILD_PREFIX/venv ]]; then
    machine=${target_platform#*-}
    if [[ "${CONDA_BUILD_SYSROOT:-}" != "" ]]; then _SYSROOT_ARG="--sysroot $CONDA_BUILD_SYSROOT"; fi
    "$BUILD_PREFIX/bin/python" -m crossenv "$PREFIX/bin/python" ${_SYSROOT_ARG:-} --without-pip "$BUILD_PREFIX/venv" \
      --sysconfigdata-file "$sysconfigdata_fn" --machine "$machine" --cc "${CC:-@CC@}" --cxx "${CXX:-@CXX@}"
    rm -rf "$BUILD_PREFIX/venv/lib/$(basename "$sysconfigdata_fn")"
    cp "$sysconfigdata_fn" "$BUILD_PREFIX/venv/lib/$(basename "$sysconfigdata_fn")"
    cp "$BUILD_PREFIX/venv/cross/bin/python" "$BUILD_PREFIX/venv/bin/cross-python"
    sed -i 's/extra_envs = .*/extra_envs = []/g' "$BUILD_PREFIX/venv/bin/cross-python" || true
    sed -i "s@import sys@import sys\nsys.argv[0] = '$PREFIX/bin/python'@g" "$BUILD_PREFIX/venv/bin/cross-python"
    sed -i.bak "s@$BUILD_PREFIX/venv/lib@$BUILD_PREFIX/venv/lib', '$BUILD_PREFIX/lib/python@PY_VER@/lib-dynload', '$BUILD_PREFIX/venv/lib/python@PY_VER@/site-packages@g" "$BUILD_PREFIX/venv/bin/cross-python"
    python_real_path=$("$BUILD_PREFIX/bin/python" -c "import os; print(os.path.realpath('$PREFIX/bin/python'))")
    rm "$python_real_path"
    cp "$BUILD_PREFIX/bin/cross_python_shim" "$python_real_path"
    rm "$BUILD_PREFIX/venv/build/bin/python"
    ln -sf "$BUILD_PREFIX/bin/$(readlink "$BUILD_PREFIX/bin/python")" "$BUILD_PREFIX/venv/build/bin/python"
    rm "$BUILD_PREFIX/bin/python"
    cp "$BUILD_PREFIX/bin/cross_python_shim" "$BUILD_PREFIX/bin/python"
    rm -rf "$BUILD_PREFIX/venv/cross"
    if [[ -d "$PREFIX/lib/python@PY_VER@/site-packages/" ]]; then
      # the host's pure-Python files over the build's (its compiled ones are the target's: left out);
      # each replaced, not written into: the two environments share files through hard links
      (cd "$PREFIX/lib/python@PY_VER@/site-packages" && find . -name "*.so" -prune -o \( -type f -o -type l \) -print0 \
        | xargs -0 -r cp -a --parents --remove-destination -t "$BUILD_PREFIX/lib/python@PY_VER@/site-packages")
    fi
    rm -rf "$BUILD_PREFIX/venv/lib/python@PY_VER@/site-packages"
    ln -s "$BUILD_PREFIX/lib/python@PY_VER@/site-packages" "$BUILD_PREFIX/venv/lib/python@PY_VER@/site-packages"
    ln -sf "$BUILD_PREFIX/venv/lib/site.py" "$BUILD_PREFIX/venv/lib/sitecustomize.py"
    unset python_real_path
    if [[ "${PYTHONPATH:-}" != "" ]]; then _CONDA_BACKUP_PYTHONPATH=${PYTHONPATH}; fi
  fi
  unset sysconfigdata_fn
  export PYTHONPATH=$BUILD_PREFIX/venv/lib/python@PY_VER@/site-packages
  echo "Finished setting up cross-python"
fi
