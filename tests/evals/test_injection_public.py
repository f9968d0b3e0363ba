"""The public injection collections are the files their packages ship, and nothing that trains or tunes the
detector reads them: what it flags of them is a measure nobody tuned to."""

from __future__ import annotations

from pathlib import Path

import pytest
from evals.injection import public


def test_the_public_collections_load_with_their_labels():
    passages = public.load()
    bench = [p for p in passages if p.collection == "agent-injection-bench"]
    corpus = [p for p in passages if p.collection == "jailbreak-corpus-mini"]
    assert (sum(p.attack for p in bench), sum(not p.attack for p in bench)) == (21, 3)
    assert {p.family for p in bench if not p.attack} == {"control"}
    assert len(corpus) == 15 and all(p.attack for p in corpus)
    assert all(p.text.strip() for p in passages)


def test_a_changed_public_file_is_refused(tmp_path, monkeypatch):
    changed = tmp_path / public.JAILBREAK_CORPUS_MINI.name
    changed.write_bytes(public.JAILBREAK_CORPUS_MINI.read_bytes().replace(b"Ignore", b"Heed", 1))
    monkeypatch.setattr(public, "JAILBREAK_CORPUS_MINI", changed)
    with pytest.raises(ValueError, match="not the file its package ships"):
        public.load()


def test_training_and_tuning_never_read_the_public_collections():
    folder = Path(public.__file__).parent
    for module in ("train.py", "semantic.py", "data_set.py", "corpus_part.py"):
        source = (folder / module).read_text()
        assert "public" not in source, f"evals/injection/{module} names the public collections"
