#!/usr/bin/env bash
# Fails when a generated file is out of date with the types it is generated
# from: regenerates it (make generate) and compares. Part of make test.
set -euo pipefail
cd "$(dirname "$0")/.."
files=(pkg/api/resource/v1alpha1/zz_generated.deepcopy.go internal/backend/readonly_generated.go)
saved=$(mktemp -d); trap 'rm -rf "$saved"' EXIT
for f in "${files[@]}"; do cp "$f" "$saved/$(basename "$f")"; done
make --no-print-directory generate >/dev/null
fail=0
for f in "${files[@]}"; do
  if ! cmp -s "$f" "$saved/$(basename "$f")"; then
    echo "verify-generate: $f was out of date; it is regenerated now: review and commit it"
    fail=1
  fi
done
exit $fail
