"""The offline stand-in channel (`ssm-conda-dev standin`: command.py): this machine's binaries repacked
under conda-forge's names, by the recipe templates in recipes/."""
