"""The local stack's demo tokens (one per role), the same on every `make run`.

A client configured from one `make run` must keep working after the next. So the local tokens are kept
in the state directory (mode 0600, beside the database they open) and reused while the tokens file still
holds their hash; a revoked one is replaced. This is for the local stack only: tokens made with
`kb tokens add` exist only as hashes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from kb_core.roles import Role
from kb_server.tokens import add_token, hash_token, read_tokens

LOCAL_TOKENS_FILE = "local-tokens.json"


def local_tokens(state_dir: Path, tokens_file: Path) -> dict[Role, str]:
    path = state_dir / LOCAL_TOKENS_FILE
    try:
        kept = {Role(role): str(token) for role, token in json.loads(path.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        kept = {}
    known = read_tokens(tokens_file)
    tokens: dict[Role, str] = {}
    for role in Role:
        token = kept.get(role)
        entry = known.get(hash_token(token)) if token else None
        if token is None or entry is None or entry.role != role:
            token = add_token(tokens_file, f"local-{role.value}", role)
        tokens[role] = token
    if tokens != kept:
        state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(json.dumps({role.value: token for role, token in tokens.items()}, indent=2) + "\n")
    return tokens
