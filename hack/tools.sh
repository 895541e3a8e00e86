#!/usr/bin/env bash
# Builds, once, a tool that make verify runs, from the Go module proxy at the
# version pinned here, into $GPUDRA_CACHE (default ~/.cache/gpudra), one
# directory per tool, version and Go version (a linter built by an older Go
# cannot read newer code); prints the binary's path. Like
# hack/localcluster/build.sh: a directory is complete when its .done file
# exists, and a failed build leaves nothing behind.
#
#   hack/tools.sh staticcheck|logcheck|gci|misspell|deepcopy-gen
#
# Bump a version here; the next make verify builds it (each takes 20-60 s).
set -euo pipefail
CACHE=${GPUDRA_CACHE:-$HOME/.cache/gpudra}

case ${1:-} in
  staticcheck) pkg=honnef.co/go/tools/cmd/staticcheck version=v0.8.2 ;;
  logcheck) pkg=sigs.k8s.io/logtools/logcheck version=v0.11.0 ;;
  gci) pkg=github.com/daixiang0/gci version=v0.14.0 ;;
  # golangci's maintained fork of client9/misspell.
  misspell) pkg=github.com/golangci/misspell/cmd/misspell version=v0.8.0 ;;
  # make generate; the same version as the k8s.io modules in go.mod.
  deepcopy-gen) pkg=k8s.io/code-generator/cmd/deepcopy-gen version=v0.37.2 ;;
  *) echo "usage: $0 staticcheck|logcheck|gci|misspell|deepcopy-gen" >&2; exit 2 ;;
esac
name=$1
dir="$CACHE/tools/$name-$version-$(go env GOVERSION)"
if [ ! -e "$dir/.done" ]; then
  echo "[tools] $name $version: building into $dir" >&2
  mkdir -p "$CACHE/tools"
  tmp=$(mktemp -d "$CACHE/tools/.tmp-$name-XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # The tool's own go.mod and go.sum pin its dependencies; GOFLAGS and
  # GOWORK of the caller must not reach it.
  GOWORK=off GOFLAGS= CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath "$pkg@$version" >&2
  touch "$tmp/.done"
  chmod 755 "$tmp"; rm -rf "$dir"; mv "$tmp" "$dir"
  trap - EXIT
fi
echo "$dir/$name"
