"""(c) the local AWS down while `kb worker` runs and (d) the worker SIGKILLed at each stage of an upsert:
no message lost, no document half-written or doubled."""

from __future__ import annotations

import pytest
from reliability.faults import STAGES, TRANSACTION_SLEEP_AFTER_ORDINAL, aws_outage, worker_kill

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("stage", STAGES)
def test_a_worker_killed_at_each_stage_leaves_the_document_stored_exactly_once_and_complete(rig, stage):
    result = worker_kill(rig, stage)
    assert result.passed, result.problems()
    assert result.at_kill["worker_alive"] and result.at_kill["deliveries"] == 1  # killed there, holding the message
    if stage == "parse":
        assert result.at_kill["embedding_requests"] == result.at_kill["embedding_requests_after_kill"] == 0
    elif stage == "embed":
        assert result.at_kill["embedding_requests"] >= 1
    elif stage == "transaction":
        assert result.at_kill["chunk_rows_written_uncommitted"] == TRANSACTION_SLEEP_AFTER_ORDINAL + 1
        assert result.at_kill["chunk_rows_visible"] == 0
    else:
        assert result.at_kill["chunks"] == result.expected_chunks  # committed, the delete not yet sent
        assert result.final["logged"] == {"ingested": 1, "unchanged": 1}  # the retry found it stored


def test_the_worker_backs_off_while_aws_is_unreachable_and_outlives_a_lost_delete(rig):
    result = aws_outage(rig, idle_outage_s=5, batch_outage_s=16, mode="deny")
    assert result.backoff_lines_during_idle_outage >= 1 and result.worker_alive_after_idle_outage
    assert result.resumed_after_s is not None
    assert result.batch_in_hand
    # Its delete refused for longer than its retries last, the worker used to die (ClientError out of run).
    assert result.worker_alive_after_batch_outage, result.worker_tail
    assert result.delete_failure_lines >= 1 and not result.worker_restarted
    # What went where, short enough that pytest prints it whole (the full summary's dict was cut off).
    where = {k: getattr(result, k) for k in ("documents", "ingested_log", "queue", "dlq", "worker_tail")}
    assert result.nothing_lost_or_doubled, where
    assert result.worker_exit == 0
