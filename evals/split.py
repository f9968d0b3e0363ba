"""The fixed development / held-out split of the golden questions and of the NPL queries.

Anything tuned (BM25's k1 and b, the title weight, RRF k, leg weights, a first-rank bonus, the identifier
boost) is chosen on the development part only; the held-out part is measured once the choice is made and
is what the CI gates are set from. The rule is deterministic and does not depend on the questions' text:

    held out  <=>  int(sha256(f"{collection}:{id}"), 16) % 2 == 1

with collection "golden" (id = the question's id, e.g. "cmp-01") or "npl" (id = the NPL query number).
HELD_OUT_DIGEST is the sha256 of the sorted held-out golden ids joined by newlines: a test checks it, so
the split cannot move without the change showing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import TypeVar

HELD_OUT_DIGEST = "011df7e225ff83a59fb2f6da23a1c84b0dd4500266e3505136c0d7f8ebf9ce4a"
# The digest before the 14 point-in-time questions (*-pit-*) joined: the rule hashes each id alone, so the
# earlier questions kept their parts (a test checks it) and 7 of the new ones fell into held-out.
HELD_OUT_DIGEST_BEFORE_POINT_IN_TIME = "c42f4cf3db62c3b71e5c57d7e89d6b4ef5377711e01307679cd05510522401d7"

T = TypeVar("T")


def is_held_out(collection: str, item_id: str) -> bool:
    return int(hashlib.sha256(f"{collection}:{item_id}".encode()).hexdigest(), 16) % 2 == 1


def held_out_digest(ids: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()


def golden_part(questions: Sequence[T], part: str) -> list[T]:
    """`part` is "dev", "held_out" or "all"."""
    if part == "all":
        return list(questions)
    want = part == "held_out"
    return [q for q in questions if is_held_out("golden", q.id) == want]  # type: ignore[attr-defined]


def npl_part(query_ids: Iterable[str], part: str) -> list[str]:
    if part == "all":
        return list(query_ids)
    want = part == "held_out"
    return [qid for qid in query_ids if is_held_out("npl", qid) == want]
