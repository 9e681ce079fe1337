"""ssm-conda-dev's benchmarks: real builds (build_times.py), zstd levels (package_compression.py), the kernels (kernels.py)."""
