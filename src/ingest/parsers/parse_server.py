"""The parse server: one long-lived process that forks a child per file (ingest.parsers.child) and hands the
ingesting process back the outcome.

Why a process of its own rather than forking the ingesting process: that process holds the embedding model
(~450 MB) whose threads keep writing while a file is parsed. Each fork copied its page tables, and every page
either side then wrote was copied or faulted again: ~3 s of CPU over the corpus beside the model, and the
child's private memory (its budget) grew with the pages the *parent* wrote. The server is a small process that
only parses: a fork of it is cheap, nothing writes beside the child, and the ingesting process never maps a
parser library (the PDF one alone holds ~140 MB once imported; the server imports each on its first file).

The protocol is pickled tuples over the server's stdin and stdout (multiprocessing's framing): a job in, an
outcome out (ingest.parsers.child.parse_forked). The server stops at the end of its stdin, so it never
outlives the process that started it; Ctrl-C in a terminal reaches that process, which stops it.
"""

from __future__ import annotations

import atexit
import os
import signal
import site
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ingest.document import ParsedDocument
from ingest.parsers import child
from ingest.parsers.budget import PARSE_LIMIT_SETTING
from kb_core.process_memory import release_free_memory

_ANSWER_GRACE_S = 30.0  # past the child's own hard stop: the server itself is stuck, and is replaced
_START_S = 120.0  # for a new server's imports (~1 s) on a loaded machine, before it acknowledges a job


class ParseServer:
    """The ingesting process's handle on its parse server: started on first use (or by `start`), replaced
    when it dies or stops answering, stopped at exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # one job at a time over the one pipe
        self._process: subprocess.Popen[bytes] | None = None
        self._requests: Connection | None = None
        self._answers: Connection | None = None
        self._owner = os.getpid()

    def start(self) -> None:
        """Start it now (its imports take ~1 s), so that the first file does not wait for them."""
        with self._lock:
            self._ensure_running()

    def parse(
        self, data: bytes, name: str, *, max_memory_bytes: int, max_parse_seconds: float, **limits: Any
    ) -> ParsedDocument:
        job = (data, name, max_memory_bytes, max_parse_seconds, child.HARD_STOP_GRACE_S, limits)
        with self._lock:
            taken = self._send(job)
            if taken == "dead":  # it had died before the job reached it (killed, or its pipe broke): a new one
                self._stop()
                taken = self._send(job)
            outcome: tuple[str, Any] = ("server died", None) if taken == "dead" else ("stuck", None)
            if taken == "taken":
                wait = max_parse_seconds + child.HARD_STOP_GRACE_S + _ANSWER_GRACE_S
                try:
                    if self._answers.poll(wait):  # type: ignore[union-attr]
                        outcome = self._answers.recv()  # type: ignore[union-attr]
                except (EOFError, OSError):
                    outcome = ("server died", None)
            if outcome[0] in ("stuck", "server died"):
                self._stop()
        setting = limits.get("parse_limit_setting", PARSE_LIMIT_SETTING)
        return child.document_or_raise(outcome, max_memory_bytes, max_parse_seconds, setting)

    def _send(self, job: tuple[Any, ...]) -> str:
        """Send the job: "taken" when the server acknowledges it (at once, or once its imports are done the
        first time), "dead" when it died before taking it (so it never started), "stuck" when it does not
        answer at all."""
        self._ensure_running()
        assert self._requests is not None and self._answers is not None
        try:
            self._requests.send(job)
            if not self._answers.poll(_START_S):
                return "stuck"
            self._answers.recv_bytes()  # the acknowledgement
        except (EOFError, OSError):
            return "dead"
        return "taken"

    def stop(self) -> None:
        with self._lock:
            self._stop()

    def _ensure_running(self) -> None:
        if self._owner != os.getpid():  # a fork of the ingesting process: the pipes are its parent's
            self._process = self._requests = self._answers = None
            self._owner = os.getpid()
        if self._process is not None and self._process.poll() is None:
            return
        self._stop()
        env = dict(os.environ)
        source = str(Path(__file__).resolve().parents[2])  # the folder `ingest` is imported from
        if source not in site.getsitepackages():  # a source tree this process found on its own path
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")]))
        self._process = subprocess.Popen(
            [sys.executable, "-m", "ingest.parsers.parse_server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert self._process.stdin is not None and self._process.stdout is not None
        self._requests = Connection(os.dup(self._process.stdin.fileno()), readable=False)
        self._answers = Connection(os.dup(self._process.stdout.fileno()), writable=False)
        self._process.stdin.close()
        self._process.stdout.close()

    def _stop(self) -> None:
        for connection in (self._requests, self._answers):
            if connection is not None:
                connection.close()
        self._requests = self._answers = None
        if self._process is not None and self._owner == os.getpid():
            if self._process.poll() is None:
                self._process.kill()  # its child, if any, is killed with it (child._stop_with_parent)
            self._process.wait()
        self._process = None


_SERVER = ParseServer()
atexit.register(_SERVER.stop)


def parse_in_server(
    data: bytes, name: str, *, max_memory_bytes: int, max_parse_seconds: float, **limits: Any
) -> ParsedDocument:
    return _SERVER.parse(data, name, max_memory_bytes=max_memory_bytes, max_parse_seconds=max_parse_seconds, **limits)


def start_parse_server() -> None:
    _SERVER.start()


def serve(requests: Connection, answers: Connection) -> None:
    """The server's loop: a job in, its outcome out, until the requests end."""
    import gc
    import importlib

    from ingest.parsers import detect_format

    while True:
        try:
            data, name, max_memory_bytes, max_parse_seconds, grace_s, limits = requests.recv()
        except EOFError:
            return
        answers.send_bytes(b"")  # taken: from now on, the server's death is this file's failure
        # The format's parser is imported here, the first time: every child shares it instead of importing
        # it within its budget, and a server that is never sent a PDF never holds the PDF library (~140 MB).
        importlib.import_module(f"ingest.parsers.{detect_format(name)}")
        gc.freeze()  # a collection in a child would otherwise touch (and copy) every object imported here
        answer = child.parse_forked_pickled(
            data,
            name,
            max_memory_bytes=max_memory_bytes,
            max_parse_seconds=max_parse_seconds,
            grace_s=grace_s,
            **limits,
        )
        del data
        try:
            answers.send_bytes(answer)
        except OSError:
            return
        del answer
        release_free_memory()  # a large file's bytes and document came through here: give the pages back


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the ingesting process, which stops this one
    requests = Connection(os.dup(sys.stdin.fileno()), writable=False)
    answers = Connection(os.dup(sys.stdout.fileno()), readable=False)
    # Nothing else may write to the answers' pipe: a stray print would break its framing.
    sys.stdout = sys.stderr
    serve(requests, answers)


if __name__ == "__main__":
    main()
