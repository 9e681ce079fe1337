"""`python -m ssm_conda_dev`: ssm-conda-dev, the tools for developing this project (cli.COMMANDS)."""

from ssm_conda_dev.cli import entry

if __name__ == "__main__":
    entry()
