"""The tooling of causal-conv1d-conda: one command, `ssm-conda`, with a module per concern."""
