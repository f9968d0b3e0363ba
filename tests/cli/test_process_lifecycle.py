"""Every way a `kb serve` is stopped lets go of the embedded database: real processes, real signals.

The state directory is fresh, so the `kb serve` under test is the embedded server's only holder: once
it has gone, no postgres may be left on that data directory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from tests.cli.conftest import INITIALIZE, VENV_BIN, free_port, kb_env, postgres_of, wait_for_http, wait_until

KB = str(VENV_BIN / "kb")
pytestmark = pytest.mark.slow


def start_stdio(state_dir: Path) -> subprocess.Popen:
    process = subprocess.Popen(
        [KB, "serve", "--transport", "stdio"],
        env=kb_env(state_dir),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin and process.stdout
    process.stdin.write(INITIALIZE)
    process.stdin.flush()
    assert json.loads(process.stdout.readline())["id"] == 1  # up, and holding the database
    return process


def start_http(state_dir: Path, stderr: int = subprocess.DEVNULL) -> subprocess.Popen:
    port = free_port()
    process = subprocess.Popen(
        [KB, "serve", "--transport", "http"],
        env=kb_env(state_dir, KB_HTTP_PORT=str(port)),
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    wait_for_http(f"http://127.0.0.1:{port}/healthz", process)
    return process


def holders(state_dir: Path) -> list[int]:
    path = state_dir / "pgdata" / ".handle_pids.json"
    return json.loads(path.read_text() or "[]") if path.exists() else []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
@pytest.mark.parametrize("start", [start_stdio, start_http], ids=["stdio", "http"])
def test_a_signal_to_kb_serve_leaves_no_postgres_behind(fresh_state_dir: Path, start, sig: signal.Signals) -> None:  # type: ignore[no-untyped-def]
    process = start(fresh_state_dir)
    try:
        assert postgres_of(fresh_state_dir), "the embedded database should be running"
        assert process.pid in holders(fresh_state_dir)
        process.send_signal(sig)
        process.wait(timeout=60)
        assert wait_until(lambda: not postgres_of(fresh_state_dir), timeout=30), "postgres was left running"
        assert holders(fresh_state_dir) == []
    finally:
        if process.poll() is None:
            process.kill()


def test_a_holder_killed_outright_is_dropped_by_the_next_start_which_then_stops_postgres(
    fresh_state_dir: Path,
) -> None:
    first = start_stdio(fresh_state_dir)
    first.kill()  # SIGKILL: no chance to let go
    first.wait()
    assert first.pid in holders(fresh_state_dir) and postgres_of(fresh_state_dir)

    second = start_stdio(fresh_state_dir)
    try:
        assert holders(fresh_state_dir) == [second.pid]  # the dead holder's record is gone
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
        assert wait_until(lambda: not postgres_of(fresh_state_dir), timeout=30), "postgres was left running"
    finally:
        if second.poll() is None:
            second.kill()


def test_kb_db_stop_drops_dead_holders_and_stops_postgres(fresh_state_dir: Path) -> None:
    first = start_stdio(fresh_state_dir)
    first.kill()
    first.wait()
    done = subprocess.run([KB, "db", "stop"], env=kb_env(fresh_state_dir), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert holders(fresh_state_dir) == []
    assert wait_until(lambda: not postgres_of(fresh_state_dir), timeout=30)


def test_kb_db_stop_refuses_while_a_server_holds_the_database_and_says_who(fresh_state_dir: Path) -> None:
    # Found walking it: stopped under make run, every tool call then answered "temporarily unavailable".
    server = start_stdio(fresh_state_dir)
    try:
        refused = subprocess.run(
            [KB, "db", "stop"], env=kb_env(fresh_state_dir), capture_output=True, text=True, timeout=120
        )
        said = " ".join(refused.stderr.split())
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        # which process, by its command line (it said "make run, kb serve or kb worker" of every one)
        assert f"the database is in use by 1 running process (pid {server.pid}: kb serve" in said, said
        assert "stop it, and the database stops as it exits; or pass --force to stop it under it" in said
        assert postgres_of(fresh_state_dir), "the refusal stopped it anyway"
        forced = subprocess.run(
            [KB, "db", "stop", "--force"], env=kb_env(fresh_state_dir), capture_output=True, text=True, timeout=120
        )
        assert forced.returncode == 0, forced.stderr
        assert "stopped under 1 running process: " in forced.stdout and "`kb db start`" in forced.stdout
        assert wait_until(lambda: not postgres_of(fresh_state_dir), timeout=30)
    finally:
        server.kill()
        server.wait()


def test_a_repeated_ctrl_c_stops_kb_serve_http_without_a_traceback(fresh_state_dir: Path) -> None:
    # Found walking it: `timeout` (and an impatient person) sends SIGINT twice; uvicorn took the second as "force
    # quit", skipped the app's shutdown and let asyncio cancel it: a traceback from every cancelled pool worker.
    process = start_http(fresh_state_dir, stderr=subprocess.PIPE)
    try:
        process.send_signal(signal.SIGINT)
        time.sleep(0.02)
        process.send_signal(signal.SIGINT)
        stderr = process.communicate(timeout=60)[1].decode()
        assert "Traceback" not in stderr and "CancelledError" not in stderr, stderr
        assert wait_until(lambda: not postgres_of(fresh_state_dir), timeout=30), "postgres was left running"
    finally:
        if process.poll() is None:
            process.kill()


def make_run(tmp_path: Path, stand_in: str) -> subprocess.Popen:
    """`make run`'s real recipe under a real make, in a session of its own, with `stand_in` (Python) as `kb`."""
    repo = Path(__file__).resolve().parents[2]
    fake = tmp_path / "bin" / "kb"
    fake.parent.mkdir()
    fake.write_text("#!/usr/bin/env python3\n" + stand_in)
    fake.chmod(0o755)
    return subprocess.Popen(
        # -o: the install stamp counts as up to date, so make runs the recipe and installs nothing
        ["make", "-s", "-o", ".venv/.installed-stamp", "run", f"BIN={fake.parent}"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def test_ctrl_c_on_make_run_ends_without_a_make_error(tmp_path: Path) -> None:
    # Ctrl-C in a terminal signals make, its recipe's shell and kb together. Found walking it: the shell died of
    # it and make printed "make: *** [Makefile:…: run] Interrupt" after kb's own clean stop. `kb up` itself costs
    # minutes (database, local AWS, the corpus ingested): a stand-in for it here that stops on Ctrl-C with 130,
    # as kb up does (test_a_requested_stop_ends_kb_up_with_128_plus_the_signal); the recipe, make and the signal
    # are the real ones.
    make = make_run(
        tmp_path,
        "import sys, time\ntry:\n    print('ready', flush=True)\n    time.sleep(60)\n"
        "except KeyboardInterrupt:\n    print('kb: stopped', flush=True)\n    sys.exit(130)\n",
    )
    try:
        assert make.stdout is not None and make.stdout.readline().strip() == "ready"
        os.killpg(make.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole foreground process group
        rest, _ = make.communicate(timeout=20)
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
    assert "kb: stopped" in rest
    assert "***" not in rest and "Interrupt" not in rest and "Error" not in rest, rest


@pytest.mark.parametrize("to_group", [True, False], ids=["to-the-process-group", "to-kb-alone"])
def test_sigterm_on_make_run_ends_without_a_make_error(tmp_path: Path, to_group: bool) -> None:
    # Found walking it: make run stopped by SIGTERM ended with "make: *** [Makefile:…: run] Error 1" after kb's
    # own clean stop: a supervisor saw a failure. SIGTERM reaches the whole process group from systemd or
    # `timeout`, kb alone from `kill`. The stand-in stops on it with 143, as kb up does.
    make = make_run(
        tmp_path,
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda signum, _: sys.exit(128 + signum))\n"
        "print('ready', os.getpid(), flush=True)\ntime.sleep(60)\n",
    )
    try:
        assert make.stdout is not None
        ready, kb_pid = make.stdout.readline().split()
        assert ready == "ready"
        if to_group:
            os.killpg(make.pid, signal.SIGTERM)
        else:
            os.kill(int(kb_pid), signal.SIGTERM)
        rest, _ = make.communicate(timeout=20)
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
    assert "***" not in rest and "Terminated" not in rest and "Error" not in rest, rest
    if not to_group:  # make itself was not signalled: it says how it ended
        assert make.returncode == 0


def test_make_run_refused_at_start_still_fails_with_kbs_code(tmp_path: Path) -> None:
    # A busy port (exit 2) is a failure, not a stop: make must still say so.
    make = make_run(tmp_path, "import sys\nprint('error: port 8765 on 127.0.0.1 is in use', flush=True)\nsys.exit(2)\n")
    try:
        rest, _ = make.communicate(timeout=20)
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
    assert make.returncode != 0 and "run] Error 2" in rest, rest


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_requested_stop_ends_kb_up_with_128_plus_the_signal(fresh_state_dir: Path, tmp_path: Path, sig) -> None:  # type: ignore[no-untyped-def]
    # What the make run recipe excuses, and its tests' stand-in for kb up does: the real kb up, serving.
    (tmp_path / "corpus").mkdir()
    port = free_port()
    process = subprocess.Popen(
        [KB, "up", "--corpus", str(tmp_path / "corpus")],
        env=kb_env(fresh_state_dir, KB_HTTP_PORT=str(port)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/healthz", process)
        process.send_signal(sig)
        assert process.wait(timeout=60) == 128 + sig
        assert wait_until(lambda: not postgres_of(fresh_state_dir), timeout=30), "postgres was left running"
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_second_ctrl_c_or_sigterm_while_make_run_finishes_the_file_in_hand_stops_it_at_once(
    fresh_state_dir: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    # Found walking it as the operator: "finishing the file in hand before stopping (Ctrl-C again stops at once)",
    # and a second Ctrl-C then changed nothing: Python's exit joined the embedding pool's threads, which finished
    # the 1 MB file first (65 s). A big file (about a minute of embedding here) is in hand at the first Ctrl-C.
    # A second SIGTERM (an operator's `kill`, again) was let through the same way: 44 s, and the file was logged
    # failed with the database's AdminShutdown.
    from tests.support.documents import markdown_document

    sentence = "Reconciliation breaks above the threshold are escalated to the treasury lead within two hours. "
    sections = {f"{n}. Section {n}": sentence * 60 for n in range(1, 121)}
    folder = tmp_path / "corpus" / "finance"
    folder.mkdir(parents=True)
    (folder / "FIN-SOP-990.md").write_text(markdown_document("FIN-SOP-990", sections=sections))
    process = subprocess.Popen(
        [KB, "up", "--no-serve", "--corpus", str(tmp_path / "corpus")],
        env=kb_env(fresh_state_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    said: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            said.append(line)

    import threading

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert wait_until(lambda: any("uploaded 1 files" in line for line in said), timeout=120), said
        time.sleep(8)  # the worker has received it and is embedding
        process.send_signal(sig)
        assert wait_until(lambda: any("finishing the file in hand" in line for line in said), timeout=30), said
        process.send_signal(sig)
        stopped = time.monotonic()
        process.wait(timeout=60)
        waited = time.monotonic() - stopped
    finally:
        if process.poll() is None:
            process.kill()
    reader.join(timeout=5)
    text = "".join(said)
    assert process.returncode == 128 + sig and "stopping at once" in text and "Traceback" not in text, text
    assert "AdminShutdown" not in text, text
    assert waited < 15, f"{waited:.0f} s after the second Ctrl-C"
    assert wait_until(lambda: not postgres_of(fresh_state_dir), timeout=30)
    assert not (fresh_state_dir / "local-aws.json").exists()
