#!/usr/bin/env bash
# Builds the ingest worker's Lambda package, the CodeUri of infra/template.yaml: the project and all
# its dependencies as Linux x86_64 / CPython 3.12 wheels, unpacked in build/lambda/. Then
# `sam deploy -t infra/template.yaml` zips that folder as it is (no `sam build` needed).
#
# The python3.12 runtime runs on Amazon Linux 2023 (glibc 2.34): wheels up to manylinux_2_34 load there.
# (python3.11's runtime is Amazon Linux 2, glibc 2.26: too old for numpy 2.4's manylinux_2_27 wheels.)
# Lambda refuses a .zip package over 250 MB unzipped: the script stops with the size if it is over.
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=build/lambda
LIMIT_MB=250

# pip does not widen a --platform to older glibc versions itself: name every manylinux up to 2.34.
platforms=(--platform manylinux2014_x86_64)
for minor in $(seq 17 34); do platforms+=(--platform "manylinux_2_${minor}_x86_64"); done

rm -rf "$OUT" build/lambda-wheel
"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir build/lambda-wheel .
"$PYTHON" -m pip install --quiet --no-compile --target "$OUT" \
    "${platforms[@]}" --implementation cp --python-version 3.12 --only-binary=:all: \
    build/lambda-wheel/*.whl
# Provided by the Lambda runtime or never used there.
rm -rf "$OUT"/bin "$OUT"/boto3 "$OUT"/botocore "$OUT"/s3transfer

size_mb=$(du -sm "$OUT" | cut -f1)
echo "$OUT: ${size_mb} MB unzipped (Lambda's limit for a .zip package: ${LIMIT_MB} MB)"
if [ "$size_mb" -gt "$LIMIT_MB" ]; then
    echo "error: the package is over Lambda's limit; see the largest entries:" >&2
    du -sm "$OUT"/* | sort -rn | head -10 >&2
    exit 1
fi
