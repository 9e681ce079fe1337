"""ssm_conda.archs: the one parser of TORCH_CUDA_ARCH_LIST values and the one compatibility rule."""

from __future__ import annotations

import pytest
from ssm_conda.archs import ArchEntry, arch_covers, parse_arch_list, resolve_arch_option, version_key
from ssm_conda.console import UsageError

SUPPORTED = ["7.5", "8.0", "9.0", "10.0", "12.0"]


@pytest.mark.parametrize(
    ("cap", "arch_list", "covered"),
    [
        ("9.0", "7.5;8.0;9.0", "sm_90 code"),
        ("8.6", "7.5;8.0;9.0", "sm_80 code (binary compatible)"),
        ("10.3", "9.0;10.0;12.0", "sm_100 code (binary compatible)"),
        ("12.1", "7.5;8.0;9.0", None),
        ("12.1", "7.5;8.0;9.0+PTX", "compute_90 PTX (JIT-compiled at first use)"),
        ("7.0", "7.5;8.0;12.1+PTX", None),
        ("11.0", "9.0;10.0", None),
    ],
)
def test_arch_covers(cap: str, arch_list: str, covered: str | None) -> None:
    assert arch_covers(cap, arch_list) == covered


def test_version_key_orders_numerically() -> None:
    assert sorted(["12.10", "12.9", "9.0"], key=version_key) == ["9.0", "12.9", "12.10"]


@pytest.mark.parametrize(
    ("value", "entries"),
    [
        ("8.0;9.0+PTX", [ArchEntry("8.0"), ArchEntry("9.0", True)]),
        (" 8.0, 9.0  10.0 ", [ArchEntry("8.0"), ArchEntry("9.0"), ArchEntry("10.0")]),
        ("09.0", [ArchEntry("9.0")]),
        ("", []),
    ],
)
def test_parse_arch_list(value: str, entries: list[ArchEntry]) -> None:
    assert parse_arch_list(value) == entries


@pytest.mark.parametrize("bad", ["sm_90", "9", "9.0+ptx", "9.0a", "9.0;x"])
def test_parse_arch_list_names_the_bad_entry(bad: str) -> None:
    with pytest.raises(ValueError, match="is not X.Y or X.Y\\+PTX"):
        parse_arch_list(bad)


def test_resolve_names_the_value_and_what_is_accepted() -> None:
    def resolve(value: str) -> str:
        return resolve_arch_option(value, "13.0", "8.0;9.0+PTX", SUPPORTED, detect=lambda: ["9.0"])

    assert resolve("all") == "8.0;9.0+PTX"
    assert resolve("native") == "9.0"
    assert resolve("9.0,12.0+PTX") == "9.0;12.0+PTX"
    for bad, named in (("8.6", "'8.6'"), ("sm_90", "'sm_90'"), (";", "--arch is empty")):
        with pytest.raises(UsageError, match=named) as info:
            resolve(bad)
        assert "accepted: all, native, or ';'-separated from 7.5, 8.0, 9.0, 10.0, 12.0" in str(info.value)
