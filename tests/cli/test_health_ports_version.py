"""/healthz and /readyz on a real server, a busy port found before anything else, and the version."""

from __future__ import annotations

import socket
import subprocess
from importlib import metadata
from pathlib import Path

import httpx2
import pytest
from tests.cli.conftest import VENV_BIN, free_port, kb_env, stop, wait_for_http, wait_until

KB = str(VENV_BIN / "kb")


def test_kb_version_is_the_package_version() -> None:
    done = subprocess.run([KB, "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert done.stdout.strip() == f"kosha-kb {metadata.version('kosha-kb')}"


@pytest.mark.parametrize("command", [["serve", "--transport", "http"], ["up"]], ids=["serve", "make-run"])
def test_a_busy_port_is_one_line_naming_kb_http_port_before_anything_starts(
    fresh_state_dir: Path, command: list[str]
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [KB, *command],
            env=kb_env(fresh_state_dir, KB_HTTP_PORT=str(port)),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1 and "KB_HTTP_PORT" in lines[0] and str(port) in lines[0]
    assert not (fresh_state_dir / "pgdata").exists()  # nothing was started


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["--host", "no.such.host.invalid"], "is not an address or a name this machine can resolve"),
        (["--host", "192.0.2.1"], "is not an address of this machine"),  # TEST-NET-1: never a local address
    ],
    ids=["unresolvable-name", "not-this-machines-address"],
)
def test_a_host_that_cannot_be_bound_is_named_as_such_not_as_a_busy_port(
    fresh_state_dir: Path, options: list[str], named: str
) -> None:
    done = subprocess.run(
        [KB, "serve", "--transport", "http", *options, "--port", str(free_port())],
        env=kb_env(fresh_state_dir, KB_HTTP_ALLOWED_HOSTS="kb.example:443"),  # off loopback needs an allow-list
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "KB_HTTP_HOST" in lines[0] and "in use" not in lines[0]
    assert not (fresh_state_dir / "pgdata").exists()


@pytest.mark.parametrize("port", ["99999", "-5", "0"])
def test_a_port_outside_1_to_65535_is_a_usage_error_not_a_traceback(fresh_state_dir: Path, port: str) -> None:
    done = subprocess.run(
        [KB, "serve", "--transport", "http", "--port", port],
        env=kb_env(fresh_state_dir),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "--port" in done.stderr
    assert not (fresh_state_dir / "pgdata").exists()


@pytest.mark.slow
def test_readyz_is_ready_with_every_check_named_and_not_ready_once_the_database_is_gone(fresh_state_dir: Path) -> None:
    port = free_port()
    env = kb_env(fresh_state_dir, KB_HTTP_PORT=str(port))
    server = subprocess.Popen([KB, "serve", "--transport", "http"], env=env, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{base}/healthz", server)
        ready = httpx2.get(f"{base}/readyz", timeout=10)
        assert ready.status_code == 200
        assert ready.json() == {"status": "ready", "checks": {"database": "ok", "migrations": "ok", "embedder": "ok"}}

        stopped = subprocess.run([KB, "db", "stop", "--force"], env=env, capture_output=True, text=True, timeout=120)
        assert stopped.returncode == 0, stopped.stderr

        def not_ready() -> bool:
            answer = httpx2.get(f"{base}/readyz", timeout=10)
            return answer.status_code == 503 and answer.json()["checks"]["database"].startswith("unreachable")

        assert wait_until(not_ready, timeout=30)
        assert httpx2.get(f"{base}/healthz", timeout=10).status_code == 200  # alive all the same
    finally:
        stop(server)
