"""`kb audit` as compliance staff and the operator run it: a real process against a real PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg import sql
from tests.server.conftest import VENV_BIN, database_url

from kb_core.db.targets import DatabaseTargets

RECORDS = [
    # (days ago, caller, role, doc codes, citations)
    (400, "alice-laptop", "compliance_officer", ["CMP-SOP-004"], ["kb://compliance/CMP-SOP-004@2.0#4.2"]),
    (10, "alice-laptop", "compliance_officer", ["CMP-SOP-004"], ["kb://compliance/CMP-SOP-004@3.1#4.2"]),
    (5, "bob-ide", "analyst", ["PAY-SOP-001"], ["kb://payments/PAY-SOP-001@1.0#2"]),
    (1, "bob-ide", "analyst", ["CMP-SOP-004", "PAY-SOP-001"], ["kb://compliance/CMP-SOP-004@3.1#4.2"]),
]


@pytest.fixture
def logged(database: DatabaseTargets) -> DatabaseTargets:
    with psycopg.connect(database.owner, autocommit=True) as conn:
        for days, caller, role, codes, citations in RECORDS:
            conn.execute(
                """INSERT INTO kb.audit_log (at, caller, role, transport, kind, operation, arguments, citations,
                                             doc_codes, result_count, outcome, duration_ms)
                   VALUES (now() - make_interval(days => %s), %s, %s, 'http', 'tool', 'search_knowledge_base',
                           '{"query": "EDD threshold"}', %s, %s, %s, 'ok', 3.5)""",
                (days, caller, role, citations, codes, len(citations)),
            )
    return database


def kb(targets: DatabaseTargets, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / "kb"), "audit", *args],
        env={**os.environ, "DATABASE_URL": database_url(targets), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def jsonl(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def test_kb_audit_filters_by_caller_role_doc_code_and_time(logged):
    everything = jsonl(kb(logged).stdout)
    by_caller = jsonl(kb(logged, "--caller", "alice-laptop").stdout)
    by_role = jsonl(kb(logged, "--role", "analyst").stdout)
    by_doc = jsonl(kb(logged, "--doc", "cmp-sop-004").stdout)
    recent = jsonl(kb(logged, "--since", "2000-01-01", "--doc", "PAY-SOP-001", "--limit", "1").stdout)
    assert [r["caller"] for r in everything] == [r[1] for r in RECORDS]  # oldest first
    assert {r["caller"] for r in by_caller} == {"alice-laptop"} and len(by_caller) == 2
    assert {r["role"] for r in by_role} == {"analyst"} and len(by_role) == 2
    assert len(by_doc) == 3 and all("CMP-SOP-004" in r["doc_codes"] for r in by_doc)
    assert [r["citations"] for r in recent] == [RECORDS[2][4]]
    assert everything[0]["arguments"] == {"query": "EDD threshold"}

    with psycopg.connect(logged.owner) as conn:
        (second,) = conn.execute("SELECT at FROM kb.audit_log ORDER BY at OFFSET 1 LIMIT 1").fetchone()
    window = jsonl(kb(logged, "--since", second.isoformat(), "--until", "2999-01-01").stdout)
    assert [r["caller"] for r in window] == ["alice-laptop", "bob-ide", "bob-ide"]


def test_kb_audit_says_when_no_record_matches_on_stderr_and_writes_nothing(logged):
    # Found walking it: `kb audit --caller nobody` printed nothing, which reads as a broken command.
    done = kb(logged, "--caller", "nobody")
    assert (done.returncode, done.stdout, done.stderr.strip()) == (0, "", "no audit records match")


def test_kb_audit_writes_csv_for_a_spreadsheet(logged):
    rows = list(csv.DictReader(io.StringIO(kb(logged, "--format", "csv", "--caller", "bob-ide").stdout)))
    assert [r["citations"] for r in rows] == [
        "kb://payments/PAY-SOP-001@1.0#2",
        "kb://compliance/CMP-SOP-004@3.1#4.2",
    ]
    assert (
        json.loads(rows[0]["arguments"]) == {"query": "EDD threshold"}
        and rows[1]["doc_codes"] == "CMP-SOP-004 PAY-SOP-001"
    )
    # One time format in both outputs, ISO 8601 (the JSON lines had a space for the T).
    lines = jsonl(kb(logged, "--caller", "bob-ide").stdout)
    assert [r["at"] for r in lines] == [r["at"] for r in rows] and "T" in rows[0]["at"]
    assert {r["degraded"] for r in rows} <= {"true", "false"}  # JSON's spelling, not Python's


@pytest.fixture
def login(logged: DatabaseTargets) -> Iterator[Callable[[str], str]]:
    made: list[str] = []

    def make(role: str) -> str:
        name = f"audit_{role}_{os.getpid()}_{len(made)}"
        with psycopg.connect(logged.owner, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
            conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(role), sql.Identifier(name)))
            conn.execute(
                sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                    sql.Identifier(conn.info.dbname), sql.Identifier(name)
                )
            )
        made.append(name)
        return database_url(logged).replace("postgresql://postgres@", f"postgresql://{name}@")

    yield make
    with psycopg.connect(logged.owner, autocommit=True) as conn:
        for name in made:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def test_a_compliance_login_reads_the_log_and_an_analyst_login_is_refused_in_one_line(logged, login):
    compliance = kb(logged, "--caller", "bob-ide", KB_AUDIT_DATABASE_URL=login("compliance_officer"))
    analyst = kb(logged, KB_AUDIT_DATABASE_URL=login("analyst"))
    assert compliance.returncode == 0 and len(jsonl(compliance.stdout)) == 2
    assert analyst.returncode == 2 and analyst.stdout == ""
    assert "may not read the audit log" in analyst.stderr and "Traceback" not in analyst.stderr


def test_prune_removes_only_records_past_retention_and_records_itself(logged):
    pruned = kb(logged, "prune", "--older-than", "365d")
    assert pruned.returncode == 0 and "removed 1 audit records" in pruned.stderr
    left = jsonl(kb(logged).stdout)
    assert [r["caller"] for r in left[:3]] == ["alice-laptop", "bob-ide", "bob-ide"]
    assert left[-1]["operation"] == "audit prune" and left[-1]["kind"] == "maintenance"
    assert left[-1]["result_count"] == 1 and left[-1]["arguments"] == {"older_than_days": 365}


def test_prune_takes_its_default_from_the_retention_setting(logged):
    pruned = kb(logged, "prune", KB_AUDIT_RETENTION_DAYS="7")
    assert pruned.returncode == 0 and "removed 2 audit records older than 7 days" in pruned.stderr


@pytest.mark.parametrize("age", ["0d", "a year", "-5d"])
def test_a_bad_age_gets_one_line_naming_the_form(logged, age):
    pruned = kb(logged, "prune", "--older-than", age)
    assert pruned.returncode == 2 and "365d" in pruned.stderr and "Traceback" not in pruned.stderr
    assert len(jsonl(kb(logged).stdout)) == len(RECORDS)


def test_an_age_of_zero_is_refused_for_being_zero_not_for_its_form(logged):
    pruned = kb(logged, "prune", "--older-than", "0w")
    assert pruned.returncode == 2 and "'0w' is no age: prune records at least 1 day old" in pruned.stderr


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--role", "boss", "error: --role must be one of demo_readonly, support_agent, analyst, compliance_officer"),
        ("--doc", "nope", "error: --doc 'nope' is not a doc code: the form is DEP-TYP-NNN, e.g. CMP-SOP-004"),
    ],
)
def test_a_filter_that_could_match_nothing_gets_one_line_instead_of_an_empty_log(logged, option, value, message):
    done = kb(logged, option, value)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == message


@pytest.mark.parametrize(
    ("args", "env", "setting"),
    [
        ((), {"KB_AUDIT_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/x"}, "KB_AUDIT_DATABASE_URL"),
        (("prune", "--older-than", "365d"), {"DATABASE_URL": "postgresql://nobody@127.0.0.1:1/x"}, "DATABASE_URL"),
    ],
)
def test_an_unreachable_audit_database_gets_one_line_naming_the_setting(database, args, env, setting):
    # Found walking it: `kb audit` printed a 50-line traceback ending in psycopg's OperationalError.
    done = kb(database, *args, **env)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "cannot reach the audit log at postgresql://nobody@127.0.0.1:1/x" in done.stderr
    assert f"check {setting}" in done.stderr
