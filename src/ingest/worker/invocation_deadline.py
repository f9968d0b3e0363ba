"""A Lambda invocation's deadline, shared by the records of its batch.

Five records each allowed KB_MAX_PARSE_SECONDS can need more than the function's Timeout: the invocation is
then killed, every record of the batch comes back, and after maxReceiveCount receives they are dead-lettered
with no reason recorded. So each record's parse budget is KB_MAX_PARSE_SECONDS cut to what the invocation has
left less KB_WORKER_RESERVE_SECONDS (kept for what follows a parse: the parse child's hard stop, embedding,
storing, reporting), and a record that would get less than MIN_PARSE_SECONDS is not started at all: it is
handed back to SQS as a batch item failure, to be delivered again, and recorded in kb.ingest_log as 'deferred'
(not 'failed': nothing about its file failed).

A record handed back still counts a receive. So the batch starts its records most-received first: a record
handed back (or failed on a budget cut short) is first in its next batch, where its budget is
KB_MAX_PARSE_SECONDS whole, and a file that is fine is not dead-lettered for landing behind slow ones. Only
several such records in one batch, time after time, can still send one to the dead-letter queue unstarted; its
'deferred' entry is then the last error `kb aws status` shows for it.
Outside Lambda (`kb worker`, tests) there is no context, hence no deadline: the budget is KB_MAX_PARSE_SECONDS.
"""

from __future__ import annotations

from typing import Any

# Most documents parse in well under a second; a budget shorter than this would fail nearly any larger file
# with a time-out that says nothing about it, where delivering it again costs nothing.
MIN_PARSE_SECONDS = 1.0


def seconds_left(context: Any) -> float | None:
    """What the invocation has left (the Lambda context's get_remaining_time_in_millis); None without one."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return None if remaining is None else remaining() / 1000


def parse_budget(left_s: float | None, *, max_parse_seconds: float, reserve_s: float) -> float:
    """A record's parse budget: KB_MAX_PARSE_SECONDS, or what the invocation has left less the reserve when
    that is less (to 0.1 s: the error names it). May be below MIN_PARSE_SECONDS, or negative."""
    if left_s is None:
        return max_parse_seconds
    return min(max_parse_seconds, round(left_s - reserve_s, 1))


def cut_setting(max_parse_seconds: float, reserve_s: float) -> str:
    """How a time-out names a budget cut short by the invocation's deadline."""
    return (
        f"KB_MAX_PARSE_SECONDS {max_parse_seconds:g} cut to the invocation's time left less "
        f"KB_WORKER_RESERVE_SECONDS {reserve_s:g}"
    )


def receive_count(record: dict[str, Any]) -> int:
    """How many times SQS has delivered the record (1 the first time)."""
    try:
        return int(record["attributes"]["ApproximateReceiveCount"])
    except (KeyError, TypeError, ValueError):
        return 1


def most_received_first(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The order to start a batch's records in: most-received first, otherwise as delivered."""
    return sorted(records, key=receive_count, reverse=True)
