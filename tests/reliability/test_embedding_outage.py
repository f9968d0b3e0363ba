"""(b) The embedding endpoint down under `kb serve` with KB_EMBEDDER=openai: degraded answers with the
reason, then full answers again once it is back, without restarting the server."""

from __future__ import annotations

import os

import pytest
from reliability.faults import embedding_outage

pytestmark = pytest.mark.slow


def test_searches_degrade_while_the_endpoint_is_down_and_recover_when_it_is_back(postgres_superuser, tmp_path):
    result = embedding_outage(
        postgres_superuser, tmp_path, clients=4, outage_s=8, database=f"kb_test_rel_openai_{os.getpid()}"
    )
    assert result.errors == {}
    assert set(result.before) == {"ok"}
    assert result.during_all_degraded, result.during
    assert all("full-text search only" in reason for reason in result.degraded_reasons), result.degraded_reasons
    assert result.degraded_latency_ms["max"] < 10_000
    assert result.all_clients_ok_after_up_s is not None  # every client got a full answer again
    assert result.server_pid_unchanged
