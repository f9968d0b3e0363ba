"""`make test` is the one gate CI runs, so the checks `make lint` runs are part of it: lint and formatting
(ruff) and types (mypy, with the settings in pyproject.toml). Type errors had crept in while only `make lint`
ran them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

BIN = Path(sys.executable).parent
CODE = ["src", "tests", "bench", "evals", "tools", "reliability"]


def run(*command: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=f"{REPO / 'src'}{os.pathsep}{REPO}")
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_the_code_passes_ruff_lint_and_format():
    for command in (["check", *CODE], ["format", "--check", *CODE]):
        result = run(str(BIN / "ruff"), *command, "--no-cache")
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]


def test_the_code_typechecks(tmp_path):
    result = run(str(BIN / "mypy"), "--cache-dir", str(tmp_path / "mypy"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]
