"""The product's version, from the installed package's metadata (pyproject.toml), never typed twice."""

from __future__ import annotations

from importlib import metadata


def package_version() -> str:
    try:
        return metadata.version("kosha-kb")
    except metadata.PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"
