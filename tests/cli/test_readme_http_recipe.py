"""The README's HTTP token recipe, run word for word from README.md on a fresh state directory."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from tests.cli.conftest import (
    VENV_BIN,
    free_port,
    initialize_status,
    kb_env,
    stop,
    wait_for_http,
    wait_until,
)

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_http_recipe() -> list[list[str]]:
    """The commands of the first sh block after the README's "Streamable HTTP" paragraph."""
    text = README.read_text()
    start = text.index("**Streamable HTTP**")
    block = re.search(r"```sh\n(.*?)```", text[start:], re.S)
    assert block, "README.md has no sh block after **Streamable HTTP**"
    commands = []
    for line in block.group(1).splitlines():
        words = shlex.split(line, comments=True)
        if words:
            assert words[0].startswith(".venv/bin/"), f"README command not run from .venv/bin: {line}"
            commands.append([str(VENV_BIN / words[0].removeprefix(".venv/bin/")), *words[1:]])
    return commands


@pytest.mark.slow
def test_the_readme_http_recipe_serves_the_printed_token_and_refuses_it_once_revoked(fresh_state_dir: Path) -> None:
    commands = readme_http_recipe()
    assert any(c[1:3] == ["tokens", "add"] for c in commands)
    assert any(c[1:3] == ["tokens", "revoke"] for c in commands)
    port = free_port()
    env = kb_env(fresh_state_dir, KB_HTTP_PORT=str(port))
    mcp_url = f"http://127.0.0.1:{port}/mcp"
    token = None
    server = None
    try:
        for command in commands:
            if command[1] == "serve":
                server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                wait_for_http(f"http://127.0.0.1:{port}/healthz", server)
                assert token is not None
                assert initialize_status(mcp_url, token) == 200
                continue
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
            assert "Traceback" not in done.stderr
            if command[1:3] == ["tokens", "add"]:
                token = done.stdout.strip()
                assert token.startswith("kb_")
            elif command[1:3] == ["tokens", "list"]:
                assert "alice-laptop" in done.stdout and "analyst" in done.stdout
                assert token not in done.stdout + done.stderr
            elif command[1:3] == ["tokens", "revoke"]:
                assert server is not None and token is not None
                assert wait_until(lambda t=token: initialize_status(mcp_url, t) == 401, timeout=10)
        assert server is not None and server.poll() is None
    finally:
        if server is not None:
            stop(server)
