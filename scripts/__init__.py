"""Tooling that builds, tests and uploads the causal-conv1d conda packages."""
