#!/usr/bin/env bash
# make fix: the mechanical fixes make verify asks for, on every Go file of
# the repository. Re-runnable: a file that is right already is left alone,
# so run it again after a rebase instead of merging such edits by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
files() { git ls-files --cached --others --exclude-standard '*.go' | while read -r f; do [ -f "$f" ] && echo "$f"; done; }
hack/boilerplate.sh update
files | xargs gofmt -s -w
gci=$(hack/tools.sh gci)
files | grep -v '^hack/localcluster/modules/' | xargs "$gci" write --skip-generated \
  -s standard -s default -s "prefix(github.com/gpudra/gpudra)" 2>&1 | { grep -v 'INFO.*Writing formatted File' || true; } >&2
