"""What `fabrikit sites import` and `fabrikit sites init` print after writing a profile:
what was carried over, each hazard with its line, and the next two commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def next_steps(path: str, nodes: int | None) -> list[str]:
    return [f"fabrikit doctor --profile {path}", f"run-multinode --profile {path} --nodes {nodes or 2} --dry-run"]


def import_report(result: Any, script: Path, output: str, as_json: bool) -> str:
    """The hazard report of an import (`result` is a `site_import.ImportResult`)."""
    where = "standard output" if output == "-" else output
    steps = next_steps(output if output != "-" else f"{result.name}.yaml", result.nodes)
    if as_json:
        return json.dumps({
            "site": result.name, "script": str(script), "profile": None if output == "-" else output,
            "preset": result.preset, "carried": result.carried, "nodes": result.nodes,
            "hazards": [h._asdict() for h in result.hazards], "next": steps,
        }, indent=2)
    fixed = sum(h.status == "fixed" for h in result.hazards)
    todo = sum(h.status == "todo" for h in result.hazards)
    c = result.carried
    lines = [
        f"fabrikit: wrote {where}: site '{result.name}' (extends {result.preset}) from {script}",
        f"carried over: {c['slurm settings']} Slurm settings, {c['binds']} binds, {c['env']} environment variables",
        f"hazards: {fixed} fixed, {todo} to do" + (":" if result.hazards else ""),
    ]
    for h in result.hazards:
        line = f"line {h.line}" if h.line else "script"
        lines.append(f"  {h.status:<5}  {line:<8}  {h.code}: {h.message}")
    lines.append("next:")
    lines.extend(f"  {step}" for step in steps)
    return "\n".join(lines)


def init_report(result: Any, output: str, as_json: bool) -> str:
    """What `sites init` found and what is left to do (`result` is a `site_init.InitResult`)."""
    steps = next_steps(output if output != "-" else f"{result.name}.yaml", None)
    if as_json:
        return json.dumps({"site": result.name, "profile": None if output == "-" else output,
                           "preset": result.preset, "found": result.found, "todo": result.todo, "next": steps},
                          indent=2)
    where = "standard output" if output == "-" else output
    lines = [f"fabrikit: wrote {where}: site '{result.name}' (extends {result.preset})", "found:"]
    lines += [f"  {line}" for line in result.found]
    lines.append("to do (marked TODO in the file):" if result.todo else "to do: nothing the probe knows of")
    lines += [f"  {line}" for line in result.todo]
    lines.append("next:")
    lines += [f"  {step}" for step in steps]
    return "\n".join(lines)
