"""One parse in a forked child under a memory budget (KB_MAX_PARSE_MEMORY_BYTES) and a time limit.

A parser library's memory cannot be capped from inside the process that runs it, and a Lambda over its
MemorySize is killed with no reason given (the message is received again three times, then dead-lettered).
So the parse runs in a forked child whose address space is capped (RLIMIT_AS) at what it held when forked
plus the budget: past it an allocation fails, the child reports the MemoryError (or dies of it), and the
worker fails that one file with the budget named, and goes on. The child is forked from the parse server
(ingest.parsers.parse_server), which has every parser imported: it shares them, so a small file costs a few
milliseconds more. Only Pipe is used: a Lambda has no /dev/shm for a Pool, Queue or Lock. The child is also
stopped a little after the parse-time budget, which a single parser library call could otherwise overrun.
"""

from __future__ import annotations

import ctypes
import gc
import multiprocessing
import os
import pickle
import resource
import signal
import time
from multiprocessing.connection import Connection
from typing import Any, cast

from ingest.document import ParsedDocument, ParseError
from ingest.parsers.budget import PARSE_LIMIT_SETTING, OutOfMemory

HARD_STOP_GRACE_S = 10.0  # past the parse-time budget, for the parser to notice it between pages itself
_OUT_OF_MEMORY_EXIT = 86  # the child's exit code when even reporting the MemoryError ran out of memory
_WATCH_S = 0.02  # how often the child's memory is looked at, at most: at ~2 GB/s, 40 MB past the budget
# Reading the child's memory walks every page it maps: a few ms for a child of the parse server, ~8 ms for one
# of a 500 MB process. The next look waits this many times the last one's cost: at most a tenth of a core.
_WATCH_COST_FACTOR = 10

_PR_SET_PDEATHSIG = 1  # linux/prctl.h

Outcome = tuple[str, Any]


def parse_forked(
    data: bytes, name: str, *, max_memory_bytes: int, max_parse_seconds: float, grace_s: float, **limits: Any
) -> Outcome:
    """Parse in a child forked from this process; the outcome, never an exception: ("document", document),
    ("error", the ParseError), ("memory", None), ("timeout", None) or ("died", the child's exit code)."""
    answer = parse_forked_pickled(
        data, name, max_memory_bytes=max_memory_bytes, max_parse_seconds=max_parse_seconds, grace_s=grace_s, **limits
    )
    outcome: Outcome = pickle.loads(answer)
    return outcome


def parse_forked_pickled(
    data: bytes, name: str, *, max_memory_bytes: int, max_parse_seconds: float, grace_s: float, **limits: Any
) -> bytes:
    """The outcome as the child pickled it: the parse server passes it on without unpickling a document
    it would only hold for the time of the copy."""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(
        target=_run,
        args=(receiver, sender, data, name, max_memory_bytes, {"max_parse_seconds": max_parse_seconds, **limits}),
        daemon=True,
    )
    process.start()
    sender.close()  # the child holds the only writing end: its death reads as the end of the pipe
    try:
        answer = _wait(process, receiver, max_memory_bytes, max_parse_seconds + grace_s)
    finally:
        receiver.close()
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()
    if answer is not None:
        return answer
    if process.exitcode == _OUT_OF_MEMORY_EXIT:
        return pickle.dumps(("memory", None))
    return pickle.dumps(("died", process.exitcode))


def document_or_raise(
    outcome: Outcome, max_memory_bytes: int, max_parse_seconds: float, parse_limit_setting: str = PARSE_LIMIT_SETTING
) -> ParsedDocument:
    """The document, or the ParseError that names what stopped the parse and what to do about it."""
    kind, value = outcome
    if kind == "document":
        return cast(ParsedDocument, value)
    if kind == "error":
        raise value
    if kind == "memory":
        raise ParseError(_over_memory(max_memory_bytes))
    if kind == "timeout":
        raise ParseError(
            f"parsing took longer than the {max_parse_seconds:g} s limit ({parse_limit_setting}) and was "
            "stopped: split the document, or raise the limit within the worker's timeout"
        )
    code = value or 0
    how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
    limit = f"{max_memory_bytes / 2**20:.0f} MiB parse memory limit (KB_MAX_PARSE_MEMORY_BYTES)"
    if kind == "died" and -code in (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL):
        # A parser library crashing: on input built to crash it (a stack overflow) more often than for memory.
        raise ParseError(
            f"the parser crashed ({how}) reading this file: it is damaged or built in a way the parser cannot "
            f"read (check that it opens in its own application, and re-save it), or it reached the {limit}"
        )
    if kind == "died":
        raise ParseError(
            f"the parser stopped ({how}) before it finished; the likeliest cause is the {limit}: split the "
            "document, or raise the limit with the worker's memory"
        )
    # The parse server itself stopped answering or died ("stuck", "server died"): it is replaced.
    raise ParseError(
        f"the parse server stopped answering while parsing this file ({kind}); the likeliest cause is the {limit}: "
        "split the document, or raise the limit with the worker's memory"
    )


def _wait(child: Any, receiver: Connection, budget: int, hard_stop_s: float) -> bytes | None:
    """The child's pickled answer, or None when it died without one. Meanwhile its private memory is looked
    at every _WATCH_S, or less often when a look costs more than a tenth of that. The address-space cap alone
    is not enough: memory this process freed but kept mapped is reused by the child without growing its
    address space (and copied page by page as the child writes it)."""
    stop = time.monotonic() + hard_stop_s
    interval = _WATCH_S
    while not receiver.poll(max(0.0, min(interval, stop - time.monotonic()))):
        looked = time.monotonic()
        if _private_memory(child.pid) > budget:
            child.kill()
            return pickle.dumps(("memory", None))
        interval = max(_WATCH_S, _WATCH_COST_FACTOR * (time.monotonic() - looked))
        if time.monotonic() >= stop:
            child.kill()
            return pickle.dumps(("timeout", None))
    try:
        return receiver.recv_bytes()
    except (EOFError, OSError):
        return None


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


def _run(
    receiver: Connection, sender: Connection, data: bytes, name: str, max_memory_bytes: int, limits: dict[str, Any]
) -> None:
    from ingest.parsers import parse_document

    # Should the process that forked this one die, its answer pipe breaks (no reader is left) and this one is
    # stopped: it would otherwise parse on, holding the pipes it inherited open.
    receiver.close()
    _stop_with_parent()

    gc.freeze()  # a collection would touch every object inherited from the parse server, copying its pages
    try:
        _cap_address_space(max_memory_bytes)
        try:
            outcome: tuple[str, object] = ("document", parse_document(data, name, **limits))
        except OutOfMemory:
            outcome = ("memory", None)
        except ParseError as exc:
            outcome = ("error", _sendable(exc))
        sender.send(outcome)  # the parse's garbage is gone by now: only the result is held
    except MemoryError:
        os._exit(_OUT_OF_MEMORY_EXIT)
    finally:
        sender.close()


def _sendable(error: ParseError) -> ParseError:
    """The error, or a plain ParseError of its message when it would not come back from a pickle: an error
    class whose __init__ takes other arguments than its message raised TypeError when it was unpickled, and
    the file failed with no reason recorded, then was dead-lettered."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return ParseError(str(error))
    return error


def _stop_with_parent() -> None:
    """Linux: be killed when the process that forked this one dies (it is single-threaded: the parse server,
    or a test). Elsewhere the broken answer pipe stops the child once its parse ends."""
    try:
        prctl = ctypes.CDLL(None).prctl
    except (OSError, AttributeError):
        return
    parent = os.getppid()
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before the call
        os._exit(1)


def _cap_address_space(budget: int) -> None:
    """What the child holds now (shared with the parse server until written), plus the budget."""
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
