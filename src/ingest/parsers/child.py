"""Parsing in a child process under a memory budget (KB_MAX_PARSE_MEMORY_BYTES).

A parser library's memory cannot be capped from inside the process that runs it, and a Lambda over its
MemorySize is killed with no reason given (the message is received again three times, then dead-lettered).
So the parse runs in a forked child whose address space is capped (RLIMIT_AS) at what it held when forked
plus the budget: past it an allocation fails, the child reports the MemoryError (or dies of it), and the
worker fails that one file with the budget named, and goes on. Forked, the child shares the worker's pages
and imports, so a small file costs a few milliseconds more. Only Process and Pipe are used: a Lambda has no
/dev/shm for a Pool, Queue or Lock. The child is also stopped a little after the parse-time budget, which a
single parser library call could otherwise overrun.
"""

from __future__ import annotations

import gc
import importlib
import multiprocessing
import os
import pickle
import resource
import signal
import time
from multiprocessing.connection import Connection
from typing import Any

from ingest.document import ParsedDocument, ParseError
from ingest.parsers.budget import OutOfMemory

_HARD_STOP_GRACE_S = 10.0  # past the parse-time budget, for the parser to notice it between pages itself
_OUT_OF_MEMORY_EXIT = 86  # the child's exit code when even reporting the MemoryError ran out of memory
_WATCH_S = 0.02  # how often the child's memory is looked at, at most: at ~2 GB/s, 40 MB past the budget
# Reading the child's memory walks every page it maps: ~8 ms for a child of a 500 MB worker, so looking every
# 20 ms took 40% of a core while a child lived (and ~2 s of CPU over the corpus beside the model). The next
# look waits this many times the last one's cost: at most a tenth of a core on it.
_WATCH_COST_FACTOR = 10


def parse_in_child(
    data: bytes, name: str, *, max_memory_bytes: int, max_parse_seconds: float, **limits: Any
) -> ParsedDocument:
    from ingest.parsers import detect_format

    # Imported here, before the fork: the child shares the module instead of loading it inside its budget.
    importlib.import_module(f"ingest.parsers.{detect_format(name)}")
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(
        target=_run,
        args=(sender, data, name, max_memory_bytes, {"max_parse_seconds": max_parse_seconds, **limits}),
        daemon=True,
    )
    child.start()
    sender.close()  # the child holds the only writing end: its death reads as the end of the pipe
    try:
        outcome, value = _wait(child, receiver, max_memory_bytes, max_parse_seconds)
    finally:
        receiver.close()
        child.join(5)
        if child.is_alive():
            child.kill()
            child.join()
    if outcome == "document":
        return value
    if outcome == "error":
        raise value
    if outcome == "memory" or child.exitcode == _OUT_OF_MEMORY_EXIT:
        raise ParseError(_over_memory(max_memory_bytes))
    code = child.exitcode or 0
    how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
    limit = f"{max_memory_bytes / 2**20:.0f} MiB parse memory limit (KB_MAX_PARSE_MEMORY_BYTES)"
    if -code in (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL):
        # A parser library crashing: on input built to crash it (a stack overflow) more often than for memory.
        raise ParseError(
            f"the parser crashed ({how}) reading this file: it is damaged or built in a way the parser cannot "
            f"read (check that it opens in its own application, and re-save it), or it reached the {limit}"
        )
    raise ParseError(
        f"the parser stopped ({how}) before it finished; the likeliest cause is the {limit}: split the "
        "document, or raise the limit with the worker's memory"
    )


def _wait(child: Any, receiver: Connection, budget: int, max_parse_seconds: float) -> tuple[str, Any]:
    """The child's answer; meanwhile its private memory is looked at every _WATCH_S, or less often when a look
    costs more than a tenth of that (a large worker's child). The address-space cap
    alone is not enough: memory this process freed but kept mapped is reused by the child without growing
    its address space (and copied page by page as the child writes it)."""
    stop = time.monotonic() + max_parse_seconds + _HARD_STOP_GRACE_S
    interval = _WATCH_S
    while not receiver.poll(max(0.0, min(interval, stop - time.monotonic()))):
        looked = time.monotonic()
        if _private_memory(child.pid) > budget:
            child.kill()
            return "memory", None
        interval = max(_WATCH_S, _WATCH_COST_FACTOR * (time.monotonic() - looked))
        if time.monotonic() >= stop:
            child.kill()
            raise ParseError(
                f"parsing took longer than the {max_parse_seconds:g} s limit (KB_MAX_PARSE_SECONDS) and was "
                "stopped: split the document, or raise the limit within the worker's timeout"
            )
    try:
        return receiver.recv()
    except (EOFError, OSError, pickle.UnpicklingError):
        return "died", None


def _private_memory(pid: int | None) -> int:
    """Memory the process alone holds (Private_Clean + Private_Dirty): right after the fork nearly none, as
    every page is shared with this process; each page the child writes, or a new one, is its own."""
    total = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    total += int(line.split()[1]) * 1024
    except OSError:  # the child is gone: its answer or its death is in the pipe
        pass
    return total


def _run(sender: Connection, data: bytes, name: str, max_memory_bytes: int, limits: dict[str, Any]) -> None:
    from ingest.parsers import parse_document

    gc.freeze()  # a collection would touch every object inherited from the worker, copying its pages
    try:
        _cap_address_space(max_memory_bytes)
        try:
            outcome: tuple[str, object] = ("document", parse_document(data, name, **limits))
        except OutOfMemory:
            outcome = ("memory", None)
        except ParseError as exc:
            outcome = ("error", exc)
        sender.send(outcome)  # the parse's garbage is gone by now: only the result is held
    except MemoryError:
        os._exit(_OUT_OF_MEMORY_EXIT)
    finally:
        sender.close()


def _cap_address_space(budget: int) -> None:
    """What the child holds now (shared with the worker until written), plus the budget."""
    with open("/proc/self/statm") as statm:
        held = int(statm.read().split()[0]) * resource.getpagesize()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = held + budget if hard == resource.RLIM_INFINITY else min(held + budget, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _over_memory(budget: int) -> str:
    return (
        f"parsing needed more than the {budget / 2**20:.0f} MiB parse memory limit (KB_MAX_PARSE_MEMORY_BYTES): "
        "split the document, or raise the limit with the worker's memory (MemorySize in infra/template.yaml)"
    )
