"""The options several commands take, each defined once: its name, what it accepts, what its value is.
Each command's run() resolves its arguments and the environment once, into one frozen options object."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from ssm_conda.channels import DEFAULT_CHANNEL, normalise_channel
from ssm_conda.matrix import PLATFORMS, TARGET_PLATFORM
from ssm_conda.paths import variants_dir, workspace

CHANNEL_FORMS = "a name, an http(s):// or file:// URL, or a local folder"


def add_channels(parser: argparse.ArgumentParser, use: str, default: str = DEFAULT_CHANNEL) -> None:
    parser.add_argument("-c", "--channel", action="append", metavar="CHANNEL",
                        help=f"{use} (repeatable; default: {default}): {CHANNEL_FORMS}")


def channels(values: Sequence[str] | None, default: Sequence[str] = (DEFAULT_CHANNEL,),
             form: Callable[[str], str] = normalise_channel) -> tuple[str, ...]:
    """Each channel checked (a bad one is a UsageError) and in `form`, each once, in the order given."""
    return tuple(dict.fromkeys(form(c) for c in values)) if values else tuple(default)


def add_variants_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variants-dir", type=Path, metavar="DIR",
                        help="the folder of variant files to read (default: the workspace's variants/)")


def variants_folder(value: Path | None) -> Path:
    return value or variants_dir()


def add_target_platform(parser: argparse.ArgumentParser, use: str) -> None:
    parser.add_argument("--target-platform", choices=PLATFORMS, default=TARGET_PLATFORM,
                        help=f"the conda platform {use} (default: this machine's, {TARGET_PLATFORM})")


def add_output_dir(parser: argparse.ArgumentParser, use: str) -> None:
    parser.add_argument("--output-dir", type=Path, metavar="DIR",
                        help=f"the local output channel {use} (default: the workspace's output/)")


def output_folder(value: Path | None) -> Path:
    return (value or workspace() / "output").resolve()
