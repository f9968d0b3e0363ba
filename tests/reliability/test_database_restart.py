"""(a) The database restarted while `kb serve --transport http` serves: a clear error, fast; then recovery
without restarting the server."""

from __future__ import annotations

import pytest
from reliability.faults import database_restart

pytestmark = pytest.mark.slow


def test_requests_fail_fast_while_the_database_is_down_and_the_server_recovers(restartable_database, tmp_path):
    cluster, url = restartable_database
    result = database_restart(cluster, url, tmp_path, clients=4, outage_s=6)
    assert result.errors == {}  # nothing but answers and the clear "temporarily unavailable" error
    assert set(result.before) == {"ok"}
    assert result.outage_answered_clearly, (result.during, result.unavailable_total)
    assert result.unavailable_latency_ms["max"] < 10_000  # fails fast: bounded by the pool's timeout
    assert all("temporarily unavailable" in text for text in result.other_tool_during.values())
    assert result.all_clients_ok_after_start_s is not None and result.all_clients_ok_after_start_s < 60
    assert result.server_pid_unchanged and result.server_alive  # the same server process recovered
