"""The offline stand-in channel: this machine's binaries repacked under conda-forge's names.

catalog: which packages, from which wheels. host: what the machine has (python, nvcc, gcc, glibc,
torch). wheels: finding, reading and downloading wheels. packages: the stand-ins and their recipes
(templates in recipes/). reuse: what the channel already holds. repack: building the channel.
command: `ssm-conda standin`.
"""
