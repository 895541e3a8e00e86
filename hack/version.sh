#!/usr/bin/env bash
# What gpudra's binaries and image are stamped with, from one place:
#
#   hack/version.sh version    the release: the chart's appVersion (also the image tag the chart pulls)
#   hack/version.sh revision   the git commit, -dirty with uncommitted changes ("unknown" outside git)
#   hack/version.sh ldflags    the go build -ldflags -X flags that stamp both into internal/version
#
# make build, make image (hack/image.sh), make gpu-check and the e2e image
# use it; the Dockerfile takes the same two values as build arguments.
# VERSION and REVISION in the environment override.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${VERSION:-$(sed -n 's/^appVersion:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}[[:space:]]*$/\1/p' "$root/deployments/helm/gpudra/Chart.yaml")}
if [ -z "$version" ]; then echo "hack/version.sh: no appVersion in deployments/helm/gpudra/Chart.yaml" >&2; exit 1; fi
revision=${REVISION:-}
if [ -z "$revision" ]; then
  if revision=$(git -C "$root" rev-parse HEAD 2>/dev/null); then
    # Untracked files do not count: the build ignores them too.
    git -C "$root" diff --quiet HEAD -- 2>/dev/null || revision="$revision-dirty"
  else
    revision=unknown
  fi
fi
pkg=github.com/gpudra/gpudra/internal/version
case ${1:-} in
  version) echo "$version" ;;
  revision) echo "$revision" ;;
  ldflags) echo "-X $pkg.version=$version -X $pkg.revision=$revision" ;;
  *) echo "usage: hack/version.sh version|revision|ldflags" >&2; exit 2 ;;
esac
