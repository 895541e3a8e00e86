#!/usr/bin/env bash
# Builds one release of gpudra into a directory, from a clean checkout
# (make release VERSION=vX.Y.Z runs it):
#
#   hack/release.sh OUTDIR        (VERSION from the environment, or hack/version.sh's)
#
# OUTDIR then holds, for version X.Y.Z:
#   gpudra-image-X.Y.Z.oci.tar        the image (plugin, controller, CLI, NVIDIA's CDI hook) for
#                                     linux/amd64 and linux/arm64 as one OCI image index,
#                                     named ghcr.io/gpudra/gpudra:X.Y.Z (IMAGE_REPO overrides)
#   gpudra-X.Y.Z.tgz                  the Helm chart, version and appVersion X.Y.Z
#   gpudra-X.Y.Z-{linux,darwin}-{amd64,arm64}   the gpudra CLI (also kubectl-gpudra: link or copy it)
#   kubectl-gpudra-X.Y.Z-<os>-<arch>.tar.gz     the same, as krew installs it (hack/krew.sh)
#   kubectl-gpudra.krew.yaml          the krew plugin manifest for those archives
#   gpudra-X.Y.Z.sbom.txt             what every binary was built from (go version -m) and the
#                                     Debian packages of the image's glibc
#   SHA256SUMS                        sha256sum of every file above
#   image-index.txt                   the index's platforms, digests and sizes (mkimage ls)
#
# Reproducible: binaries are built with -trimpath and stamped with the
# version and the commit only; the image's glibc comes from Debian packages
# pinned in hack/release-glibc.lock, not from the build host; the image,
# the index and the chart have zero or commit-time timestamps. The same
# commit and toolchain give the same SHA256SUMS (the Go toolchain is
# go.mod's; the C compiler is Debian 12's gcc: the CI workflow runs in
# golang:<go>-bookworm).
#
# A tree with uncommitted changes is refused (RELEASE_ALLOW_DIRTY=1 builds
# it anyway, for a dry run: its version says -dirty unless VERSION is set).
# The darwin CLI is the laptop build (CGO_ENABLED=0, cmd/gpudra/nvml_nocgo.go:
# no inventory, gpu-check or simulate); should it stop building, the
# release fails saying so (RELEASE_SKIP_DARWIN=1 leaves it out, for a dry
# run).
# Needs: Go, gcc, Debian's gcc-aarch64-linux-gnu and libc6-dev-arm64-cross
# (hack/cross-deps.sh), apt-get (to download the pinned glibc), helm
# (HELM), GNU tar, sha256sum.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: hack/release.sh OUTDIR}
HELM=${HELM:?HELM must name the helm binary (make release builds it)}
say() { echo "[release] $*"; }
die() { echo "release: $*" >&2; exit 1; }
start=$(date +%s)

cd "$root"
if [ -n "$(git status --porcelain --untracked-files=normal)" ] && [ "${RELEASE_ALLOW_DIRTY:-}" != 1 ]; then
  git status --short >&2
  die "the checkout has uncommitted changes (above): a release is built from a commit; commit or stash them (RELEASE_ALLOW_DIRTY=1 for a dry run)"
fi
version=$(hack/version.sh version)
revision=$(hack/version.sh revision)
ldflags=$(hack/version.sh ldflags)
repo=${IMAGE_REPO:-ghcr.io/gpudra/gpudra}
image=$repo:$version
tagged=$(git tag --points-at HEAD --list "v$version")
[ -n "$tagged" ] || say "note: HEAD is not tagged v$version (a dry run or a pre-release; CI releases from the tag)"
# Timestamps in the chart archive: the commit's time, not the clock.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct HEAD)}
say "gpudra $version (revision $revision) into $out"

mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ -n "$(ls -A "$out")" ]; then die "$out is not empty: a release directory holds one release"; fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
hack/cross-deps.sh

# 1. The pinned glibc, one sysroot per architecture.
declare -A sysroot
while read -r arch pkg ver sum; do
  case $arch in ''|\#*) continue ;; esac
  (cd "$work" && apt-get download -q "$pkg=$ver" >/dev/null 2>"$work/apt.err") \
    || die "apt-get download $pkg=$ver failed ($(tail -1 "$work/apt.err")): Debian no longer serves that version? Update hack/release-glibc.lock (see its header)"
  deb=$(ls "$work/${pkg}_"*.deb)
  echo "$sum  $deb" | sha256sum -c --quiet - || die "$deb does not have the SHA-256 hack/release-glibc.lock pins ($sum)"
  dpkg-deb -x "$deb" "$work/glibc-$arch"
  triplet=$(ls "$work/glibc-$arch/usr" | grep -- '-linux-gnu$')
  sysroot[$arch]=$work/glibc-$arch/usr/$triplet
  echo "debian-package $pkg $ver sha256:$sum (the glibc of the linux/$arch image)" >>"$work/glibc.sbom"
done <hack/release-glibc.lock
[ -n "${sysroot[amd64]:-}" ] && [ -n "${sysroot[arm64]:-}" ] || die "hack/release-glibc.lock must pin amd64 and arm64"

# 2. The image for each architecture, and one index over both.
(cd hack/mkimage && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "$work/mkimage" .)
for arch in amd64 arm64; do
  say "image linux/$arch"
  IMAGE_ARCH=$arch IMAGE_LIBS_SYSROOT=${sysroot[$arch]} GO_BUILD_FLAGS=-trimpath GPUDRA_IMAGE_BIN_DIR="$work/bin-$arch" \
    VERSION=$version REVISION=$revision hack/image.sh "$work/image-$arch.tar" "$image"
done
# Each binary runs with the glibc its image carries and says this version:
# amd64 through the pinned ld.so, arm64 under qemu-aarch64 (user-mode
# emulation) with the pinned arm64 glibc.
for bin in gpudra-kubelet-plugin gpudra-controller gpudra; do
  arg=--version; [ "$bin" = gpudra ] && arg=version
  amd=$("${sysroot[amd64]}/lib/ld-linux-x86-64.so.2" --library-path "${sysroot[amd64]}/lib" "$work/bin-amd64/$bin" "$arg" 2>&1 | head -n 1) || true
  arm=$(qemu-aarch64 -L "${sysroot[arm64]}" "$work/bin-arm64/$bin" "$arg" 2>&1 | head -n 1) || true
  say "linux/amd64: $amd"
  say "linux/arm64 (qemu-aarch64): $arm"
  for line in "$amd" "$arm"; do
    [[ $line == *"$version"* ]] || die "$bin $arg with the image's glibc printed \"$line\", not version $version"
  done
done
"$work/mkimage" index -o "$out/gpudra-image-$version.oci.tar" -t "$image" "$work/image-amd64.tar" "$work/image-arm64.tar" >/dev/null
"$work/mkimage" ls "$out/gpudra-image-$version.oci.tar" >"$out/image-index.txt"

# 3. The CLI: linux from the image's own build (cgo, NVML for inventory and
# gpu-check), darwin without cgo.
for arch in amd64 arm64; do
  cp "$work/bin-$arch/gpudra" "$out/gpudra-$version-linux-$arch"
done
darwin_missing=
for arch in amd64 arm64; do
  say "CLI darwin/$arch (CGO_ENABLED=0)"
  if ! CGO_ENABLED=0 GOOS=darwin GOARCH=$arch go build -trimpath -ldflags "-s -w $ldflags" \
      -o "$out/gpudra-$version-darwin-$arch" ./cmd/gpudra 2>"$work/darwin.err"; then
    darwin_missing=1
    echo "release: the gpudra CLI does not build for darwin/$arch with CGO_ENABLED=0:" >&2
    head -n 15 "$work/darwin.err" >&2
  fi
done
if [ -n "$darwin_missing" ]; then
  if [ "${RELEASE_SKIP_DARWIN:-}" = 1 ]; then
    say "NO DARWIN CLI in this release: cmd/gpudra does not build without cgo (RELEASE_SKIP_DARWIN=1)"
  else
    die "no darwin CLI: cmd/gpudra must build with CGO_ENABLED=0 (its status, check, migrate, version subcommands need no NVML); RELEASE_SKIP_DARWIN=1 builds the rest"
  fi
fi

# The CLI for krew: archives and the plugin manifest.
say "krew plugin"
hack/krew.sh "$version" "$out"

# 4. The chart, stamped with the version; repacked so that the archive's
# bytes depend on the chart's files only (helm package stamps the clock).
say "chart"
"$HELM" package deployments/helm/gpudra --version "$version" --app-version "$version" -d "$work/chart" \
  2> >(grep -v 'found symbolic link in path' >&2) >/dev/null
mkdir "$work/chart/x"
tar -xzf "$work/chart/gpudra-$version.tgz" -C "$work/chart/x"
(cd "$work/chart/x" && tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
  --mode='u=rwX,go=rX' --format=gnu -cf - gpudra | gzip -n -9 >"$out/gpudra-$version.tgz")
"$HELM" lint "$out/gpudra-$version.tgz" >/dev/null 2> >(grep -v 'found symbolic link in path' >&2) \
  || die "helm lint of the packaged chart failed"

# 5. SBOM: what each binary was built from.
{
  echo "# gpudra $version (revision $revision): what each released binary was built from."
  echo "# go version -m per binary; the image's glibc as Debian packages."
  for f in "$work/bin-amd64/gpudra-kubelet-plugin" "$work/bin-amd64/gpudra-controller" "$out"/gpudra-"$version"-*; do
    echo
    echo "## $(basename "$f")"
    go version -m "$f" | sed "s#^$f#$(basename "$f")#"
  done
  echo
  echo "## image glibc"
  cat "$work/glibc.sbom"
} >"$out/gpudra-$version.sbom.txt"

(cd "$out" && sha256sum -- * | grep -v ' SHA256SUMS$' >"$work/sums" && mv "$work/sums" SHA256SUMS)
say "done in $(( $(date +%s) - start )) s: $out"
(cd "$out" && ls -l --time-style=+ | awk 'NR>1 {printf "  %10d  %s\n", $5, $NF}')
cat "$out/image-index.txt"
