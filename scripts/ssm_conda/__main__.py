from ssm_conda.cli import entry

entry()
