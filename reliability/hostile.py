"""Hostile input, for the report: tests/security run by pytest, counted per module from its JUnit XML, with
the scanner's figure on the poisoned chunks taken from what that test prints."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from reliability.harness import REPO

SCANNER_LINE = re.compile(r"scanner: (\d+) of (\d+) poisoned chunks flagged")
MISSED_LINE = re.compile(r"^  (\S+) (.+?): ")


def summary_of(module: Path) -> str:
    """The first paragraph of a test module's docstring, on one line."""
    docstring = ast.get_docstring(ast.parse(module.read_text())) or ""
    return " ".join(docstring.split("\n\n")[0].split())


def run_security_tests(folder: Path) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    junit = folder / "security.xml"
    command = [sys.executable, "-m", "pytest", "tests/security", "-p", "no:cacheprovider", f"--junitxml={junit}"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=1800)
    return parse(junit, done.stdout, command=" ".join(["pytest", *command[3:-1]]))


def parse(junit: Path, stdout: str, *, command: str) -> dict[str, Any]:
    modules: dict[str, dict[str, Any]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("classname", "").rsplit(".", 1)[-1]
        module = modules.setdefault(name, {"passed": 0, "failed": 0, "skipped": 0, "seconds": 0.0, "failures": []})
        module["seconds"] += float(case.get("time", 0))
        outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        if outcome == "passed":
            module["passed"] += 1
        elif outcome == "skipped":
            module["skipped"] += 1
        else:
            module["failed"] += 1
            module["failures"].append(case.get("name"))
    for name, module in modules.items():
        module["seconds"] = round(module["seconds"], 1)
        path = REPO / "tests" / "security" / f"{name}.py"
        module["what"] = summary_of(path) if path.exists() else ""
    scanner: dict[str, Any] | None = None
    if found := SCANNER_LINE.search(stdout):
        missed = []
        for line in stdout[found.end() :].splitlines()[1:]:
            if not (m := MISSED_LINE.match(line)):
                break
            missed.append(f"{m.group(1)} ({m.group(2)})")
        scanner = {"flagged": int(found.group(1)), "of": int(found.group(2)), "missed": missed}
    return {"command": command, "modules": modules, "scanner": scanner}
