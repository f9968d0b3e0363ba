"""The production embedder through the real `openai` client, against a local /v1/embeddings server
(the OpenAI API cannot be reached from here): batching, retries with backoff, and token accounting."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import openai
import pytest
from tests.support.openai_wire import embeddings_server, fake_vector

from kb_core.embedders.base import EmbeddingError
from kb_core.embedders.openai_embedder import OpenAIEmbedder
from kb_core.embedders.rate_limit import ProviderRateLimit
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


def test_settings_name_a_concurrency_outside_its_range():
    with pytest.raises(ValueError, match="KB_EMBED_CONCURRENCY"):
        EmbeddingSettings(KB_EMBED_CONCURRENCY="0")


def test_batches_go_out_concurrently_up_to_the_setting_and_come_back_in_order():
    texts = [f"clause {i} of the fee schedule" for i in range(64 * 12)]
    with embeddings_server(latency_s=0.2) as server:
        embedder = embedder_for(server.url, requests_in_flight=4)
        result = embedder.embed(texts)
        peak = server.peak_in_flight
    # In order: each vector is the server's vector for the text at the same position.
    for i in (0, 63, 64, 400, len(texts) - 1):
        assert result.vectors[i] == pytest.approx(np.asarray(fake_vector(texts[i], 1024)), abs=1e-6)
    assert len(server.requests) == 12
    assert peak == 4


def test_every_caller_of_one_embedder_shares_its_requests_in_flight():
    # The pipeline embeds several files at once, each call sending its own batches: the cap is the embedder's.
    texts = [[f"file {f} clause {i}" for i in range(64 * 3)] for f in range(4)]
    with embeddings_server(latency_s=0.1) as server:
        embedder = embedder_for(server.url, requests_in_flight=3)
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(embedder.embed, texts))
        peak = server.peak_in_flight
    assert [r.vectors.shape[0] for r in results] == [192] * 4
    assert peak == 3


def test_the_rate_limit_keeps_the_server_from_ever_answering_429():
    # The server allows 20 requests in any 2 seconds (a minute's limit on a 2-second period, so that the test
    # does not wait out minutes); 60 requests with 8 in flight would go over it at once without the limit.
    texts = [f"clause {i}" for i in range(60)]
    with embeddings_server(requests_per_window=20, window_s=2.0) as server:
        limit = ProviderRateLimit(20, 10**6, period_s=2.0)
        embedder = embedder_for(server.url, batch_size=1, requests_in_flight=8, rate_limit=limit)
        result = embedder.embed(texts)
    assert result.vectors.shape[0] == 60
    assert len(server.requests) == 60
    assert server.rate_limited == 0


def test_without_the_rate_limit_the_same_load_is_answered_429():
    # The control for the test above: the server's limit bites when nothing on our side keeps to it.
    texts = [f"clause {i}" for i in range(60)]
    with embeddings_server(requests_per_window=20, window_s=2.0) as server:
        embedder = embedder_for(server.url, batch_size=1, requests_in_flight=8, max_retries=0)
        with pytest.raises(EmbeddingError, match="HTTP 429"):
            embedder.embed(texts)
    assert server.rate_limited >= 1


def test_a_batch_that_fails_fails_the_whole_call_and_the_rest_are_not_sent():
    texts = [f"clause {i}" for i in range(20)]
    with embeddings_server(script=[400], latency_s=0.2) as server:
        embedder = embedder_for(server.url, batch_size=1, requests_in_flight=2)
        with pytest.raises(EmbeddingError, match="HTTP 400"):
            embedder.embed(texts)
    assert len(server.requests) < len(texts)


class FakeClock:
    """The limiter's arithmetic on a clock the test moves (the pacing itself is not a timing assertion)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_no_sixty_seconds_see_more_requests_than_the_per_minute_limit():
    clock = FakeClock()
    limit = ProviderRateLimit(120, 10**9, clock=clock, sleep=clock.sleep)
    sent = []
    for _ in range(600):
        limit.acquire(1)
        sent.append(clock.now)
    most = max(sum(1 for t in sent if start <= t < start + 60) for start in sent)
    assert most <= 120
    assert sent[-1] < 5 * 60 + 10  # and it keeps up the limit's pace (less its 1% margin): 600 in about 5 minutes


def test_requests_wait_for_the_token_budget_too():
    clock = FakeClock()
    limit = ProviderRateLimit(10**6, 6_000, clock=clock, sleep=clock.sleep)
    for _ in range(30):
        limit.acquire(1_000)
    # 6,000 tokens a minute: 30 requests of 1,000 tokens take about 5 minutes, less the bucket's first 100.
    assert 4.5 * 60 < clock.now < 5.1 * 60
