"""First run: `kb serve` and `kb search` on a state directory with nothing in it, or on a database that is
not ready, either prepare what is missing or stop with one line on stderr; never a traceback or a hang."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from tests.cli.conftest import INITIALIZE, VENV_BIN, free_port, kb_env, stop

KB = str(VENV_BIN / "kb")


def database_url(targets) -> str:  # type: ignore[no-untyped-def]
    from psycopg import conninfo as pg_conninfo

    params = pg_conninfo.conninfo_to_dict(targets.owner)
    return f"postgresql://{params['user']}@/{params['dbname']}?host={params['host']}"


@pytest.mark.slow
def test_stdio_serve_on_an_empty_state_directory_prepares_the_database_and_answers_initialize(
    fresh_state_dir: Path,
) -> None:
    process = subprocess.Popen(
        [KB, "serve", "--transport", "stdio"],
        env=kb_env(fresh_state_dir),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stdin and process.stdout
        process.stdin.write(INITIALIZE)
        process.stdin.flush()
        line = process.stdout.readline()
        reply = json.loads(line)
        assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "kosha-kb"
        assert reply["result"]["serverInfo"]["version"]  # from the package metadata
        process.stdin.close()
        assert process.wait(timeout=60) == 0
        rest = process.stdout.read()
        for extra in rest.splitlines():  # stdout carries JSON-RPC and nothing else
            assert json.loads(extra)["jsonrpc"] == "2.0"
        assert process.stderr is not None
        assert "Traceback" not in process.stderr.read().decode()
    finally:
        stop(process)


@pytest.mark.slow
def test_search_on_an_empty_state_directory_says_the_knowledge_base_is_empty(fresh_state_dir: Path) -> None:
    done = subprocess.run(
        [KB, "search", "wire transfer cut-off"],
        env=kb_env(fresh_state_dir),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "0 chunks" in done.stdout
    assert "nothing has been ingested yet" in " ".join(done.stdout.split())


@pytest.mark.parametrize(
    "command",
    [["serve", "--transport", "stdio"], ["serve", "--transport", "http"], ["search", "anything"]],
    ids=["stdio", "http", "search"],
)
def test_an_unmigrated_database_stops_the_command_with_one_line_naming_kb_db_migrate(
    empty_database, fresh_state_dir: Path, command: list[str]
) -> None:  # type: ignore[no-untyped-def]
    env = kb_env(fresh_state_dir, DATABASE_URL=database_url(empty_database), KB_HTTP_PORT=str(free_port()))
    started = time.monotonic()
    done = subprocess.run([KB, *command], env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    elapsed = time.monotonic() - started
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "kb db migrate" in lines[0] and "Traceback" not in done.stderr
    print(f"{command}: exited in {elapsed:.1f} s")  # measured, not asserted (house rule): see the report


@pytest.mark.parametrize(
    "command", [["serve", "--transport", "stdio"], ["search", "anything"]], ids=["stdio", "search"]
)
def test_an_unreachable_database_stops_the_command_with_one_line_naming_database_url(
    fresh_state_dir: Path, command: list[str]
) -> None:
    url = f"postgresql://kb@127.0.0.1:{free_port()}/kb"  # nothing listens there
    done = subprocess.run(
        [KB, *command],
        env=kb_env(fresh_state_dir, DATABASE_URL=url),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "DATABASE_URL" in lines[0] and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["   "], "error: query is empty: ask in words"),
        (["?!…"], "error: query '?!…' has no words: ask in words"),
        (["wire transfer", "-d", "marketing"], "error: unknown department 'marketing'; the departments are: "),
    ],
    ids=["empty query", "punctuation only", "unknown department"],
)
def test_search_refuses_what_the_mcp_tool_refuses_in_one_line(
    fresh_state_dir: Path, arguments: list[str], message: str
) -> None:
    done = subprocess.run(
        [KB, "search", *arguments], env=kb_env(fresh_state_dir), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and done.stderr.startswith(message), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and done.stdout == ""
    # Refused before anything was started: the state directory holds no database.
    assert not (fresh_state_dir / "pgdata").exists()


def test_a_misspelt_setting_is_named_on_stderr_before_the_command_runs(fresh_state_dir: Path) -> None:
    done = subprocess.run(
        [KB, "search", "   "],
        env={**kb_env(fresh_state_dir), "KB_EMBEDER": "openai"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "warning: KB_EMBEDER is not a setting and is ignored: did you mean KB_EMBEDDER?"
    assert done.returncode == 2 and lines[1].startswith("error: query is empty")


UNREACHABLE = "postgresql://kb_server:pw@127.0.0.1:9/kosha_kb"  # port 9 (discard): nothing listens


def run_kb(state_dir: Path, *command: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KB, *command], env=kb_env(state_dir, **env), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("command", "setting", "message"),
    [
        # The README's production server is handed only its own login; it used to start an empty embedded
        # database under KB_STATE_DIR and serve that ("no documents your role can read"), without a word.
        (["search", "wire transfer"], "KB_SERVER_DATABASE_URL", "error: cannot log in to postgresql://kb_server@"),
        (["ingest", "corpus/risk"], "KB_INGEST_DATABASE_URL", "error: cannot log in to postgresql://kb_server@"),
        # A command that needs a login the process was not given names the setting.
        (["ingest", "corpus/risk"], "KB_SERVER_DATABASE_URL", "error: this needs the ingest login and only "),
        (["db", "migrate"], "KB_SERVER_DATABASE_URL", "error: this needs the owner login and only "),
        (["audit"], "KB_INGEST_DATABASE_URL", "error: kb audit reads the log as a login granted compliance_officer"),
    ],
)
def test_a_process_given_only_its_own_login_uses_that_database_and_never_an_embedded_one(
    fresh_state_dir: Path, command: list[str], setting: str, message: str
) -> None:
    done = run_kb(fresh_state_dir, *command, **{setting: UNREACHABLE})
    assert done.returncode == 2 and done.stderr.startswith(message), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (fresh_state_dir / "pgdata").exists()


def test_the_production_server_given_only_kb_server_database_url_searches_that_database(
    database, fresh_state_dir: Path
) -> None:  # type: ignore[no-untyped-def]
    from psycopg import conninfo as pg_conninfo

    params = pg_conninfo.conninfo_to_dict(database.server)
    url = f"postgresql://{params['user']}@/{params['dbname']}?host={params['host']}"
    done = run_kb(fresh_state_dir, "search", "wire transfer", KB_SERVER_DATABASE_URL=url)
    assert done.returncode == 0, done.stderr
    # The database given (migrated, empty) answered; no embedded one was created under KB_STATE_DIR.
    assert not (fresh_state_dir / "pgdata").exists()


@pytest.mark.parametrize("command", [["db", "status"], ["db", "migrate"], ["rescan"]])
def test_database_commands_on_an_unreachable_database_say_so_in_one_line(fresh_state_dir: Path, command) -> None:
    # Found walking it: these three printed a traceback ending in OperationalError.
    done = run_kb(fresh_state_dir, *command, DATABASE_URL=UNREACHABLE)
    assert done.returncode == 2 and done.stderr.startswith("error: cannot use the database: "), done.stderr
    assert "check DATABASE_URL" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_kb_db_stop_with_database_url_set_touches_no_embedded_database(fresh_state_dir: Path) -> None:
    # Found walking it: with DATABASE_URL set in one shell, --force stopped `make run`'s embedded database.
    done = run_kb(fresh_state_dir, "db", "stop", "--force", DATABASE_URL=UNREACHABLE)
    assert done.returncode == 2
    assert done.stderr.strip() == "DATABASE_URL is set: the embedded database is not used, there is nothing to stop"


def test_a_state_directory_that_cannot_be_a_folder_is_named_in_one_line(tmp_path: Path) -> None:
    # Found walking it: under a file, it read "the embedded database did not start (NotADirectoryError ...); see
    # <state>/pgdata/log", a log under a folder that cannot exist.
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    done = run_kb(blocker / "state", "search", "wire transfer")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"error: KB_STATE_DIR {blocker / 'state'} cannot be made a folder (Not a directory); set KB_STATE_DIR to a "
        "folder you can write"
    )
