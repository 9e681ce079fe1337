"""Every case of the table: the CASES of each module of tests/bad_input/ (one per subcommand or group)."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from tests.bad_input import Case

MODULES = sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name != "registry")
CASES: list[Case] = [case for name in MODULES for case in importlib.import_module(f"tests.bad_input.{name}").CASES]
