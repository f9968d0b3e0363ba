"""The production embedder through the real `openai` client, against a local /v1/embeddings server
(the OpenAI API cannot be reached from here): batching, retries with backoff, and token accounting."""

from __future__ import annotations

import openai
import pytest
from tests.support.openai_wire import embeddings_server

from kb_core.embedders.base import EmbeddingError
from kb_core.embedders.openai_embedder import OpenAIEmbedder
from kb_core.settings import EmbeddingSettings
from kb_core.token_count import count_tokens


def embedder_for(url: str, **kwargs: object) -> OpenAIEmbedder:
    client = openai.OpenAI(api_key="sk-test", base_url=url, max_retries=0, timeout=5)
    return OpenAIEmbedder(client, backoff_base_s=0.01, backoff_cap_s=0.05, **kwargs)  # type: ignore[arg-type]


def test_texts_are_sent_in_batches_of_64_at_1024_dimensions():
    texts = [f"clause {i} of the fee schedule" for i in range(130)]
    with embeddings_server() as server:
        result = embedder_for(server.url).embed(texts)
    assert [len(r["input"]) for r in server.requests] == [64, 64, 2]
    assert {r["model"] for r in server.requests} == {"text-embedding-3-large"}
    assert {r["dimensions"] for r in server.requests} == {1024}
    assert result.vectors.shape == (130, 1024)
    assert result.tokens == sum(count_tokens(t) for t in texts)


def test_429_and_500_are_retried_until_the_batch_succeeds():
    with embeddings_server(script=[429, 500, 503]) as server:
        embedder = embedder_for(server.url, max_retries=6)
        result = embedder.embed(["wire cut-off times"])
    assert embedder.attempts == 4
    assert len(server.requests) == 4
    assert result.vectors.shape == (1, 1024)


def test_a_retry_after_header_is_honoured_over_a_shorter_jittered_wait():
    import time

    with embeddings_server(script=[429], retry_after="0.3") as server:
        started = time.perf_counter()
        embedder_for(server.url).embed(["x"])
        elapsed = time.perf_counter() - started
    assert len(server.requests) == 2
    assert elapsed >= 0.3


def test_retries_stop_after_the_limit_with_a_clear_error():
    with embeddings_server(script=[429] * 10) as server:
        embedder = embedder_for(server.url, max_retries=2)
        with pytest.raises(EmbeddingError, match="HTTP 429"):
            embedder.embed(["x"])
    assert len(server.requests) == 3


def test_a_client_error_is_not_retried():
    with embeddings_server(script=[400]) as server:
        embedder = embedder_for(server.url)
        with pytest.raises(EmbeddingError, match="HTTP 400"):
            embedder.embed(["x"])
    assert len(server.requests) == 1


def test_an_unreachable_endpoint_fails_with_a_clear_error():
    embedder = embedder_for("http://127.0.0.1:9/v1", max_retries=1)
    with pytest.raises(EmbeddingError, match="could not be reached"):
        embedder.embed(["x"])


def test_settings_without_an_api_key_are_refused_by_name():
    with pytest.raises(EmbeddingError, match="OPENAI_API_KEY"):
        OpenAIEmbedder.from_settings(EmbeddingSettings(KB_EMBEDDER="openai"))
