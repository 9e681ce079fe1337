"""What developing this project needs beside ssm-conda-dev's commands (`python -m ssm_conda.dev`):
the pinned sdists unpacked and patched as the builds patch them, and solves and installs done as
pixi does them, for the tests and the benchmarks. The commands themselves are cli.DEV_COMMANDS
(standin/, benchmarks/)."""
