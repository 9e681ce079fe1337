"""ssm_conda.channels: a local channel that conda and py-rattler can install from."""

import json

from rattler import Subdir
from ssm_conda.channels import index_channel


def test_index_creates_repodata_for_native_and_noarch(tmp_path):
    index_channel(tmp_path)
    for subdir in (str(Subdir.current()), "noarch"):
        repodata = json.loads((tmp_path / subdir / "repodata.json").read_text())
        assert repodata["info"]["subdir"] == subdir
        assert repodata["packages.conda"] == {}
