"""`kb tokens add` keeps a name to one holder: it does not silently replace a token, nor take a blank name."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tests.cli.conftest import VENV_BIN, kb_env

KB = str(VENV_BIN / "kb")


def kb(state_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([KB, *args], env=kb_env(state_dir), capture_output=True, text=True, timeout=60)


def test_a_second_add_for_a_name_is_refused_unless_replace_is_asked_for(fresh_state_dir: Path) -> None:
    first = kb(fresh_state_dir, "tokens", "add", "alice-laptop", "--role", "analyst")
    assert first.returncode == 0, first.stderr
    again = kb(fresh_state_dir, "tokens", "add", "alice-laptop", "--role", "analyst")
    assert again.returncode == 2 and again.stdout == ""
    lines = again.stderr.strip().splitlines()
    assert len(lines) == 1 and "alice-laptop has a token already (analyst, created " in lines[0]
    assert "--replace" in lines[0]
    tokens_file = (fresh_state_dir / "tokens.json").read_text()
    assert first.stdout.strip() not in tokens_file  # only hashes are stored

    replaced = kb(fresh_state_dir, "tokens", "add", "alice-laptop", "--role", "compliance_officer", "--replace")
    assert replaced.returncode == 0, replaced.stderr
    assert replaced.stdout.strip() != first.stdout.strip()
    listed = kb(fresh_state_dir, "tokens", "list").stdout.splitlines()
    assert listed[0].split() == ["name", "role", "created"]
    assert [line.split()[:2] for line in listed[1:]] == [["alice-laptop", "compliance_officer"]]


@pytest.mark.parametrize("name", ["", "   ", " alice", "bob\tlaptop", "alice laptop"])
def test_a_blank_padded_or_spaced_token_name_is_refused_in_one_line(fresh_state_dir: Path, name: str) -> None:
    done = kb(fresh_state_dir, "tokens", "add", name, "--role", "analyst")
    assert done.returncode == 2 and done.stdout == ""
    assert "is not a token name: use one such as alice-laptop" in done.stderr
    assert not (fresh_state_dir / "tokens.json").exists()
