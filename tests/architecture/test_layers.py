"""The package layers of docs/architecture.md, as import-linter contracts that CI runs.

kb_cli → (kb_server | ingest) → kb_core: arrows only point down, the middle two never import each other,
and no package has an import circle inside it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """Run the contract of root/pyproject.toml against the packages under root/src."""
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def copy_of_tree(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def add_import(module: Path, statement: str) -> None:
    text = module.read_text()
    marker = "from __future__ import annotations\n"
    assert marker in text, module
    module.write_text(text.replace(marker, marker + "\n" + statement + "\n", 1))


def test_the_layer_contracts_hold_on_the_tree() -> None:
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "statement", "contract"),
    [
        ("kb_core/settings.py", "import kb_server.search  # noqa: F401", "kb_cli wires kb_server and ingest"),
        ("kb_core/roles.py", "import ingest.chunker  # noqa: F401", "kb_cli wires kb_server and ingest"),
        ("ingest/pipeline.py", "import kb_server.search  # noqa: F401", "kb_cli wires kb_server and ingest"),
        ("kb_server/search.py", "import ingest.scanner  # noqa: F401", "kb_cli wires kb_server and ingest"),
        ("kb_server/server.py", "import kb_cli.common  # noqa: F401", "kb_cli wires kb_server and ingest"),
        ("ingest/document.py", "import ingest.chunker  # noqa: F401", "No import circles"),
    ],
    ids=[
        "core-imports-server",
        "core-imports-ingest",
        "ingest-imports-server",
        "server-imports-ingest",
        "server-imports-cli",
        "circle-inside-ingest",
    ],
)
def test_an_upward_sideways_or_circular_import_breaks_the_contract(
    copy_of_tree: Path, module: str, statement: str, contract: str
) -> None:
    add_import(copy_of_tree / "src" / module, statement)
    result = lint_imports(copy_of_tree)
    assert result.returncode != 0, result.stdout
    assert f"{contract}" in result.stdout
    broken = [line for line in result.stdout.splitlines() if line.endswith("BROKEN")]
    assert broken and all(contract in line for line in broken), result.stdout


def test_the_worker_handler_imports_without_the_server_package_or_its_web_stack() -> None:
    """What the Lambda image holds: the core and ingest. Every ingest module imports with kb_server, kb_cli
    and the MCP/web libraries made unimportable, and the handler is callable."""
    script = textwrap.dedent(
        """
        import importlib, importlib.abc, pkgutil, sys

        BLOCKED = ("kb_server", "kb_cli", "mcp", "uvicorn", "starlette", "typer")

        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"{name} is not in the worker image")
                return None

        sys.meta_path.insert(0, Block())
        import ingest
        from ingest.worker.lambda_handler import handler
        assert callable(handler)
        for info in pkgutil.walk_packages(ingest.__path__, "ingest."):
            importlib.import_module(info.name)
        import kb_core.db.targets, kb_core.settings, kb_core.embedders  # the handler's cold-start imports
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        assert not loaded, loaded
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
