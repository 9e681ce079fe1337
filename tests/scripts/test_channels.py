"""ssm_conda.channels: a local channel that conda and py-rattler can install from."""

import json

from rattler import Subdir
from ssm_conda.channels import index_channel, name_and_build_of


def test_index_creates_repodata_for_native_and_noarch(tmp_path):
    index_channel(tmp_path)
    for subdir in (str(Subdir.current()), "noarch"):
        repodata = json.loads((tmp_path / subdir / "repodata.json").read_text())
        assert repodata["info"]["subdir"] == subdir
        assert repodata["packages.conda"] == {}


def test_name_and_build_of_a_file_name():
    assert name_and_build_of("mamba-ssm-2.3.2.post1-cuda130_py312_torch213_all_habc_0.conda") == \
        ("mamba-ssm", "cuda130_py312_torch213_all_habc_0")
    assert name_and_build_of("cuda-cudart-dev-13.0.96-h0_1.tar.bz2") == ("cuda-cudart-dev", "h0_1")
