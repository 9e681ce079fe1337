:: The Windows build script (win-64: conda-forge's vs2022 and cuda-nvcc; causal-conv1d only), the patched sdist
:: pip-installed as build-extension.sh does on Linux. What it leaves out there: the compiler cache, the
:: cgroup sizing (one nvcc thread, MAX_JOBS from CPU_COUNT, as conda-forge's feedstock builds), the links
:: and prefix maps that make Linux builds byte-identical (docs/building.md: Windows).
:: rattler-build runs this file with cmd /d /c after activating the build and host prefixes; each failing
:: step stops it through the `if errorlevel 1 exit /b 1` after it (cmd goes on otherwise).

if not defined TORCH_CUDA_ARCH_LIST (
    echo TORCH_CUDA_ARCH_LIST is unset: the recipe sets it from the variant key cuda_arch_list
    exit /b 1
)
if not defined MAX_JOBS set "MAX_JOBS=%CPU_COUNT%"
if not defined NVCC_THREADS set "NVCC_THREADS=1"
:: torch's cpp_extension compiles with the cl.exe of the activated vs2022 environment only when told to
set "DISTUTILS_USE_SDK=1"
set "TORCH_NO_COMPILER_WRAPPER=1"
echo building with MAX_JOBS=%MAX_JOBS% NVCC_THREADS=%NVCC_THREADS%

:: The source's time, as build-extension.sh writes it: `ssm-conda build` gives the archive this time.
"%PYTHON%" -c "import os; print(int(os.path.getmtime('PKG-INFO')))" > "%SRC_DIR%\..\source-date-epoch"
if errorlevel 1 exit /b 1
for /f "usebackq" %%t in ("%SRC_DIR%\..\source-date-epoch") do set "SOURCE_DATE_EPOCH=%%t"

"%PYTHON%" -m pip install . -vv --no-deps --no-build-isolation --no-index
if errorlevel 1 exit /b 1
:: pip records the build's work directory as where the package came from: not a conda package's. (del
:: takes no wildcard in a folder's name: for /d expands it.)
for /d %%d in ("%SP_DIR%\%PKG_NAME:-=_%-*.dist-info") do del /q "%%d\direct_url.json" 2>nul
exit /b 0
