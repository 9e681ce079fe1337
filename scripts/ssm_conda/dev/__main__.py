"""`python -m ssm_conda.dev`: ssm-conda-dev, the tools for developing this project (cli.DEV_COMMANDS)."""

from ssm_conda.cli import dev_entry

if __name__ == "__main__":
    dev_entry()
