"""Which AWS the ops commands talk to, decided once and said in one line.

- AWS_ENDPOINT_URL set: that endpoint (a local AWS such as moto, or docker-compose's).
- KB_AWS_TARGET=aws: real AWS, with boto3's usual credentials. Real AWS is never the fallback.
- Otherwise the local stack that `make run` / `kb aws local` recorded in the state directory, if it is
  still running (its endpoint and dummy credentials are filled in here).
- Otherwise nothing: the caller gets one line naming both ways to get a target.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import psutil

from kb_core.settings import AwsSettings

RECORD_FILE = "local-aws.json"
DUMMY_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}


class NoAwsTarget(Exception):
    """Neither a local AWS nor real AWS is configured; the message says how to get one."""


@dataclass(frozen=True)
class AwsTarget:
    endpoint_url: str | None
    description: str


def record_local_stack(state_dir: Path, endpoint_url: str) -> Path:
    """Write where this process's local AWS listens, for ops commands run from other terminals."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / RECORD_FILE
    path.write_text(json.dumps({"endpoint_url": endpoint_url, "pid": os.getpid()}) + "\n")
    return path


def forget_local_stack(state_dir: Path) -> None:
    path = state_dir / RECORD_FILE
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def recorded_local_stack(state_dir: Path) -> str | None:
    """The recorded local AWS endpoint, if its process is alive and something still answers there."""
    try:
        record = json.loads((state_dir / RECORD_FILE).read_text())
        endpoint = str(record["endpoint_url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    # A recorder killed outright leaves its record; its port (4566 by default) may since be another state
    # directory's local AWS, which is not this one's.
    if isinstance(record.get("pid"), int) and not psutil.pid_exists(record["pid"]):
        return None
    parsed = urlparse(endpoint)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 80), timeout=1):
            return endpoint
    except OSError:
        return None


def resolve_aws_target(settings: AwsSettings, state_dir: Path) -> AwsTarget:
    """Decide the target, fill settings.endpoint_url (and dummy credentials for a local AWS) in place."""
    if settings.endpoint_url:
        _dummy_credentials()
        return AwsTarget(settings.endpoint_url, f"AWS endpoint {settings.endpoint_url} (AWS_ENDPOINT_URL)")
    if settings.target == "aws":
        return AwsTarget(None, f"real AWS, region {settings.region} (KB_AWS_TARGET=aws)")
    recorded = recorded_local_stack(state_dir)
    if recorded:
        settings.endpoint_url = recorded
        os.environ["AWS_ENDPOINT_URL"] = recorded
        _dummy_credentials()
        return AwsTarget(recorded, f"the local AWS at {recorded} (recorded in {state_dir / RECORD_FILE})")
    raise NoAwsTarget(
        "no local AWS is running for this state directory (start one with `make run` or `kb aws local`) and "
        "real AWS is not selected (set KB_AWS_TARGET=aws, or AWS_ENDPOINT_URL for another endpoint)"
    )


def _dummy_credentials() -> None:
    # A local AWS accepts any credentials; boto3 insists that some exist.
    for name, value in DUMMY_CREDENTIALS.items():
        os.environ.setdefault(name, value)
