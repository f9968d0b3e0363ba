"""The production embedder: OpenAI text-embedding-3-large at 1,024 dimensions, through the `openai` client.

Batches of 64, up to `requests_in_flight` of them at once (across every embed call of this embedder:
the pipeline embeds several files at a time), each request first taking its share of the provider's
per-minute request and token budgets (kb_core.embedders.rate_limit), so that going faster does not mean
going over the limits. On 429 and 5xx (and dropped connections) a batch is retried with full-jitter
exponential backoff (a random wait between 0 and min(cap, base * 2^attempt)), never shorter than a
Retry-After the API sent. The client's own retries are off so that this policy is the only one. Tokens are
counted from the API's `usage`, so each document's record says what it cost.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import openai
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from kb_core.db.embedding_space import EmbeddingSpace
from kb_core.embedders.base import EmbeddingError, Embeddings
from kb_core.embedders.rate_limit import ProviderRateLimit
from kb_core.settings import EmbeddingSettings
from kb_core.token_count import EMBEDDING_INPUT_LIMIT, count_tokens

log = logging.getLogger(__name__)
MAX_INPUT_TOKENS = EMBEDDING_INPUT_LIMIT  # the model's limit per input (8191 for every OpenAI embedding model)


def is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return isinstance(exc, openai.APIConnectionError | openai.APITimeoutError)


class _FullJitterOrRetryAfter(wait_random_exponential):
    retry_after_cap_s = 60.0  # a server asking for longer than this is treated as asking for this

    def __call__(self, retry_state: RetryCallState) -> float:
        jitter = super().__call__(retry_state)
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        if isinstance(exc, openai.APIStatusError):
            retry_after = exc.response.headers.get("retry-after")
            try:
                return max(jitter, min(float(retry_after), self.retry_after_cap_s)) if retry_after else jitter
            except ValueError:
                return jitter
        return jitter


class OpenAIEmbedder:
    max_input_tokens = MAX_INPUT_TOKENS  # the chunker fits every chunk to it (ingest.pipeline)

    def __init__(
        self,
        client: openai.OpenAI,
        *,
        model: str = "text-embedding-3-large",
        dimensions: int = 1024,
        batch_size: int = 64,
        max_retries: int = 6,
        backoff_base_s: float = 0.5,
        backoff_cap_s: float = 30.0,
        requests_in_flight: int = 1,
        rate_limit: ProviderRateLimit | None = None,
    ) -> None:
        self._client = client
        self._model = model
        self._dimensions = dimensions
        self._batch_size = batch_size
        self._max_retries = max_retries
        self._wait = _FullJitterOrRetryAfter(multiplier=backoff_base_s, max=backoff_cap_s)
        self.attempts = 0  # API calls made, retries included (for the record and the tests)
        self.requests_in_flight = requests_in_flight  # ingest.pipeline embeds this many files at once
        # One cap for every caller: the pipeline's files and each call's own batches share it.
        self._in_flight = threading.BoundedSemaphore(requests_in_flight)
        self._rate_limit = rate_limit
        self._count_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: EmbeddingSettings) -> OpenAIEmbedder:
        if settings.openai_api_key is None:
            raise EmbeddingError("KB_EMBEDDER=openai needs an API key: set OPENAI_API_KEY (or KB_OPENAI_API_KEY)")
        client = openai.OpenAI(
            api_key=settings.openai_api_key.get_secret_value(),
            base_url=settings.openai_base_url,
            timeout=settings.request_timeout_s,
            max_retries=0,
        )
        return cls(
            client,
            model=settings.openai_model,
            dimensions=settings.openai_dimensions,
            batch_size=settings.batch_size,
            max_retries=settings.max_retries,
            requests_in_flight=settings.concurrency,
            rate_limit=ProviderRateLimit(settings.requests_per_minute, settings.tokens_per_minute),
        )

    @property
    def space(self) -> EmbeddingSpace:
        return EmbeddingSpace(self._model, self._dimensions)

    def embed(self, texts: Sequence[str]) -> Embeddings:
        counts = [count_tokens(text) for text in texts]
        for index, count in enumerate(counts):
            if count > MAX_INPUT_TOKENS:
                raise EmbeddingError(f"input {index} has more than {MAX_INPUT_TOKENS} tokens, the model's limit")
        starts = range(0, len(texts), self._batch_size)
        batches = [(list(texts[s : s + self._batch_size]), sum(counts[s : s + self._batch_size])) for s in starts]
        if len(batches) <= 1 or self.requests_in_flight == 1:
            responses = [self._create(batch, tokens) for batch, tokens in batches]
        else:
            # A failed batch fails the whole call (no document is stored with part of its vectors), and the
            # batches not yet sent are not sent.
            pool = ThreadPoolExecutor(min(len(batches), self.requests_in_flight), thread_name_prefix="kb-openai")
            try:
                futures = [pool.submit(self._create, batch, tokens) for batch, tokens in batches]
                responses = [future.result() for future in futures]
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
        vectors: list[np.ndarray] = []
        tokens = 0
        for (batch, _), response in zip(batches, responses, strict=True):
            ordered = sorted(response.data, key=lambda item: item.index)
            if len(ordered) != len(batch):
                raise EmbeddingError(f"the API returned {len(ordered)} embeddings for {len(batch)} inputs")
            vectors.extend(np.asarray(item.embedding, dtype=np.float32) for item in ordered)
            tokens += response.usage.total_tokens if response.usage else 0
        matrix = np.vstack(vectors) if vectors else np.zeros((0, self._dimensions), dtype=np.float32)
        if matrix.shape[1:] != (self._dimensions,):
            raise EmbeddingError(f"the API returned {matrix.shape[1]}-dimensional vectors, not {self._dimensions}")
        matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        return Embeddings(vectors=matrix, tokens=tokens, windows=[1] * len(texts))

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text]).vectors[0]

    def _create(self, batch: list[str], tokens: int) -> openai.types.CreateEmbeddingResponse:
        retrying = Retrying(
            retry=retry_if_exception(is_retryable),
            wait=self._wait,
            stop=stop_after_attempt(self._max_retries + 1),
            reraise=True,
            before_sleep=lambda state: log.warning(
                "embedding batch failed (%s); retry %d of %d",
                state.outcome.exception() if state.outcome else "?",
                state.attempt_number,
                self._max_retries,
            ),
        )
        try:
            for attempt in retrying:
                with attempt:
                    if self._rate_limit is not None:
                        self._rate_limit.acquire(tokens)  # a retry is a request too
                    with self._count_lock:
                        self.attempts += 1
                    with self._in_flight:  # held for the request only, not for a back-off's sleep
                        return self._client.embeddings.create(
                            model=self._model, input=batch, dimensions=self._dimensions, encoding_format="float"
                        )
        except openai.APIStatusError as exc:
            raise EmbeddingError(f"the embeddings API answered HTTP {exc.status_code}: {exc.message}") from exc
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise EmbeddingError(f"the embeddings API could not be reached: {exc}") from exc
        raise EmbeddingError("unreachable")  # pragma: no cover - Retrying either returns or raises
