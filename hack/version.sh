#!/usr/bin/env bash
# What gpudra's binaries, image and packaged chart are stamped with, from
# one place:
#
#   hack/version.sh version        the version, from git describe (below)
#   hack/version.sh chart-version  the source chart's appVersion (Chart.yaml): the image tag
#                                  `helm install deployments/helm/gpudra` pulls from a checkout
#   hack/version.sh revision       the git commit, -dirty with uncommitted changes ("unknown" outside git)
#   hack/version.sh ldflags        the go build -ldflags -X flags that stamp version and revision into internal/version
#
# The version is `git describe --tags --match 'v[0-9]*'` without its "v":
#   on a release tag v0.1.0           0.1.0
#   3 commits after it                0.1.0-3-g<12-hex commit>
#   no release tag in the history     0.0.0-<commits>-g<12-hex commit>
#   uncommitted changes (tracked)     the above with -dirty
#   outside git (a source tarball)    the source chart's appVersion
# so every commit gives another image tag and, once `make chart` packages
# it, another chart version and appVersion: `helm upgrade` then renders new
# pods. Every value is a valid image tag and a SemVer 2 chart version.
# VERSION and REVISION in the environment override (a leading "v" is
# dropped: VERSION=v0.1.0 and VERSION=0.1.0 are the same).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
chart_version=$(sed -n 's/^appVersion:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}[[:space:]]*$/\1/p' "$root/deployments/helm/gpudra/Chart.yaml")
if [ -z "$chart_version" ]; then echo "hack/version.sh: no appVersion in deployments/helm/gpudra/Chart.yaml" >&2; exit 1; fi
ingit() { git -C "$root" rev-parse --verify -q HEAD >/dev/null 2>&1; }
version=${VERSION:-}
if [ -z "$version" ]; then
  if ! ingit; then
    version=$chart_version
  elif ! version=$(git -C "$root" describe --tags --match 'v[0-9]*' --abbrev=12 --dirty 2>/dev/null); then
    # No release tag yet: a pseudo-version below every release, still
    # naming the commit.
    version=0.0.0-$(git -C "$root" rev-list --count HEAD)-g$(git -C "$root" rev-parse --short=12 HEAD)
    git -C "$root" diff --quiet HEAD -- 2>/dev/null || version="$version-dirty"
  fi
fi
version=${version#v}
if ! [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "hack/version.sh: version \"$version\" is not MAJOR.MINOR.PATCH[-PRERELEASE] (a SemVer 2 chart version and an image tag)" >&2
  exit 1
fi
revision=${REVISION:-}
if [ -z "$revision" ]; then
  if ingit && revision=$(git -C "$root" rev-parse HEAD 2>/dev/null); then
    # Untracked files do not count: the build ignores them too.
    git -C "$root" diff --quiet HEAD -- 2>/dev/null || revision="$revision-dirty"
  else
    revision=unknown
  fi
fi
pkg=github.com/gpudra/gpudra/internal/version
case ${1:-} in
  version) echo "$version" ;;
  chart-version) echo "$chart_version" ;;
  revision) echo "$revision" ;;
  ldflags) echo "-X $pkg.version=$version -X $pkg.revision=$revision" ;;
  *) echo "usage: hack/version.sh version|chart-version|revision|ldflags" >&2; exit 2 ;;
esac
