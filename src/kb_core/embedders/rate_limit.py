"""The embedding provider's rate limits, kept on our side: requests and tokens per minute.

The provider answers 429 once an organisation goes over its limits; each costs a round trip and a back-off,
and with several requests in flight they come together. So every request first takes its share of both
budgets here, and waits while either is spent.

Each budget is a token bucket refilled continuously, holding at most a second's worth: the provider may
enforce a per-minute limit over shorter periods, and a bucket that held a minute's worth would let twice the
limit through in the first minute. It refills at (limit - capacity) per minute, less 1% for clock and
network jitter, so that no 60 seconds ever see more than the limit, whatever the alignment. A request of
more tokens than the bucket holds goes once it is full and leaves it owing the rest (so a minute may see
one request's excess over the token limit). The `limits` package was tried first: its window counters are
aligned to the clock minute and let up to twice the limit through across a boundary, and its moving window
keeps an entry per unit of cost, a million for a token budget.

The budgets are this process's: N processes sharing one organisation's limits each get 1/N of them
(KB_EMBED_RPM, KB_EMBED_TPM).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

_MARGIN = 0.99


@dataclass
class _Bucket:
    per_period: int
    period_s: float
    capacity: float = field(init=False)
    rate_per_s: float = field(init=False)
    level: float = field(init=False)

    def __post_init__(self) -> None:
        self.capacity = max(1.0, self.per_period / self.period_s)
        self.rate_per_s = _MARGIN * max(self.per_period - self.capacity, 1.0) / self.period_s
        self.level = self.capacity

    def refill(self, elapsed_s: float) -> None:
        self.level = min(self.capacity, self.level + elapsed_s * self.rate_per_s)

    def wait_for(self, cost: float) -> float:
        """Seconds until `cost` can be spent: a cost above the capacity goes once the bucket is full (then
        the bucket owes the rest, and later requests wait for it)."""
        need = min(cost, self.capacity) - self.level
        # A float's rounding can leave a refilled bucket a hair short; such a hair is not worth a wait.
        return 0.0 if need <= 1e-9 * self.capacity else need / self.rate_per_s


class ProviderRateLimit:
    def __init__(
        self,
        requests_per_minute: int,
        tokens_per_minute: int,
        *,
        period_s: float = 60.0,  # a minute; shorter in tests, so that a test does not wait out a minute
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.requests = _Bucket(requests_per_minute, period_s)
        self.tokens = _Bucket(tokens_per_minute, period_s)
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()  # checking both budgets and spending them is one step
        self._last = clock()

    def acquire(self, tokens: int) -> None:
        """Wait until one more request of `tokens` tokens fits both budgets, then spend it."""
        while True:
            with self._lock:
                now = self._clock()
                for bucket in (self.requests, self.tokens):
                    bucket.refill(now - self._last)
                self._last = now
                wait = max(self.requests.wait_for(1), self.tokens.wait_for(tokens))
                if wait == 0:
                    self.requests.level -= 1
                    self.tokens.level -= tokens
                    return
            self._sleep(wait)
