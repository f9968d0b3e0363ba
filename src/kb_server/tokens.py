"""Bearer tokens of the HTTP transport: the tokens file, and a store that follows it while the server runs.

The file holds `{"tokens": [{"name", "role", "sha256", "created"}]}`: a token's sha256, never the token.
`kb tokens add` / `kb tokens revoke` rewrite it (atomically, by rename); a running server looks at the
file's modification time at most once a second and reloads it when it changed, so an added token works
and a revoked one stops working within seconds, without a restart.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kb_core.roles import Role

RELOAD_CHECK_S = 1.0


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return "kb_" + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class TokenEntry:
    name: str
    role: Role
    created: str | None = None  # ISO 8601, UTC; files written before it was recorded have none


class TokensFileError(ValueError):
    """The tokens file cannot be read; the message names the file and the fixing command."""


def read_tokens(path: Path) -> dict[str, TokenEntry]:
    """sha256 -> entry; an absent file is an empty one."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(text)
        return {
            item["sha256"]: TokenEntry(item["name"], Role(item["role"]), item.get("created")) for item in data["tokens"]
        }
    except (ValueError, KeyError, TypeError) as exc:
        raise TokensFileError(
            f"tokens file {path} is not valid ({exc}); fix it or delete it and run `kb tokens add NAME --role ROLE`"
        ) from None


def _raw(path: Path) -> list[dict[str, Any]]:
    read_tokens(path)  # refuse to rewrite a file we cannot read
    return list(json.loads(path.read_text())["tokens"]) if path.exists() else []


def _write(path: Path, items: list[dict[str, Any]]) -> None:
    # Written beside the file and renamed over it, so a server reloading it never reads half a file.
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tokens-", suffix=".json")
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps({"tokens": items}, indent=2) + "\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def add_token(path: Path, name: str, role: Role, token: str | None = None) -> str:
    """Create (or replace) `name`'s token with `role`; store its hash; return the token (shown once)."""
    token = token or new_token()
    items = [t for t in _raw(path) if t["name"] != name]
    created = datetime.now(UTC).isoformat(timespec="seconds")
    items.append({"name": name, "role": role.value, "sha256": hash_token(token), "created": created})
    _write(path, items)
    return token


def revoke_token(path: Path, name: str) -> bool:
    """Remove `name`'s token; False when there was none."""
    items = _raw(path)
    kept = [t for t in items if t["name"] != name]
    if len(kept) == len(items):
        return False
    _write(path, kept)
    return True


def list_tokens(path: Path) -> list[TokenEntry]:
    return sorted(read_tokens(path).values(), key=lambda e: e.name)


class TokenStore:
    """sha256(token) -> entry, reloaded from its file when the file changes."""

    def __init__(self, entries: dict[str, TokenEntry], path: Path | None = None) -> None:
        self._entries = entries
        self._path = path
        self._stamp = _stamp(path) if path else None
        self._checked = time.monotonic()
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: Path | None) -> TokenStore:
        return cls(read_tokens(path) if path else {}, path)

    def _refresh(self) -> None:
        if self._path is None or time.monotonic() - self._checked < RELOAD_CHECK_S:
            return
        with self._lock:
            self._checked = time.monotonic()
            stamp = _stamp(self._path)
            if stamp == self._stamp:
                return
            try:
                self._entries = read_tokens(self._path)
            except TokensFileError:
                return  # keep serving the last good tokens; `kb tokens list` names the problem
            self._stamp = stamp

    def role_of(self, token: str) -> TokenEntry | None:
        self._refresh()
        return self._entries.get(hash_token(token))

    def __len__(self) -> int:
        self._refresh()
        return len(self._entries)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)
