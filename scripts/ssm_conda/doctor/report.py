"""The doctor's output: a facts table, the commands and the findings as text, or JSON (schema 1)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ssm_conda.console import format_table
from ssm_conda.doctor.advice import Advice
from ssm_conda.doctor.facts import Facts, InstalledDist, TorchInfo
from ssm_conda.project import NAMES

SCHEMA = 2  # 2: the interpreter's extensions, each by name


def _torch_row(torch: TorchInfo | None) -> str:
    if torch is None:
        return "not installed"
    origin = "conda" if torch.dist and torch.dist.from_conda else (torch.dist.installer if torch.dist else None)
    detail = [f"CUDA {torch.cuda}" if torch.cuda else "CPU-only" if not torch.import_error else "import fails"]
    if torch.cxx11_abi is not None:
        detail.append(f"cxx11 ABI {'yes' if torch.cxx11_abi else 'no'}")
    if origin:
        detail.append(f"from {origin}")
    return f"{torch.version or '?'} ({', '.join(detail)})"


def _dist_row(dist: InstalledDist | None) -> str:
    if dist is None:
        return "not installed"
    how = ", ".join(filter(None, ["conda", dist.conda_build])) if dist.from_conda else dist.installer or "pip"
    return f"{dist.version} ({how})"


def facts_rows(facts: Facts) -> list[tuple[str, str]]:
    interp, env, driver = facts.interpreter, facts.env, facts.driver
    found = driver.version or driver.cuda
    rows = [("NVIDIA driver", f"{driver.version or '?'} (supports CUDA {driver.cuda or '?'})" if found else "not found")]
    if facts.conda_override_cuda:
        rows.append(("CONDA_OVERRIDE_CUDA", facts.conda_override_cuda))
    rows += [(f"GPU {g.index}", f"{g.name}, compute capability {g.compute_cap or '?'} ({g.sm})") for g in driver.gpus] or [
        ("GPU", "none visible")]
    environment = f"{env.kind}: {env.name} ({env.prefix or env.manifest or '-'})" if env.kind else "none active"
    return [*rows, ("Platform", facts.platform), ("Python", f"{interp.version or '?'} ({interp.executable})"),
            ("torch", _torch_row(interp.torch)), ("Environment", environment), *((n, _dist_row(interp.dist(n))) for n in NAMES)]


def render_text(facts: Facts, advice: Advice) -> str:
    lines = ["causal-conv1d doctor", "", format_table(("Item", "Value"), facts_rows(facts)), ""]
    if advice.cuda:
        generation = f", GPU generation {advice.generation}" if advice.generation else ""
        lines += [f"Variant: CUDA {advice.cuda} ({advice.variant_file}), Python {advice.python}, "
                  f"torch {advice.torch}{generation}: {advice.reason}.", ""]
    if advice.install:
        lines += ["Install:", *(f"  {c}" for c in advice.install), "", "Or build it:"]
    elif advice.build:
        lines.append("No package fits; build it:")
    lines += [f"  {c}" for c in advice.build]
    warnings = [f"[{w.code}] {w.message}" for w in advice.warnings]
    for title, items in (("Warnings", warnings), ("Missing", advice.missing), ("Notes", advice.notes)):
        if items:
            lines += ["", f"{title}:", *(f"  - {item}" for item in items)]
    return "\n".join(lines)


def to_json(facts: Facts, advice: Advice) -> dict[str, Any]:
    body = {**asdict(advice), "warnings": [{"code": w.code, "message": w.message} for w in advice.warnings],
            "missing": advice.missing, "notes": advice.notes}
    del body["findings"]
    return {"schema": SCHEMA, "facts": asdict(facts), "advice": body}
