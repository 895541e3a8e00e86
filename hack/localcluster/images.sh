#!/usr/bin/env bash
# Writes the images the local cluster imports into $STATE/images: the
# sandbox (pause) image, busybox for the test pods (Debian's busybox-static)
# and the kubelet plugin's image.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
source "$here/env.sh"
mkdir -p "$STATE/images" "$STATE/bin"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
(cd "$root/hack/mkimage" && GOWORK=off CGO_ENABLED=0 go build -o "$STATE/bin/mkimage" . \
  && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/pause" ./pause)
mk=$STATE/bin/mkimage

$mk -o "$STATE/images/pause.tar" -t "$PAUSE_IMAGE" -file "$work/pause:/pause" -entrypoint /pause

bb=$(command -v busybox)
mkdir -p "$work/busybox/bin" "$work/busybox/tmp"
cp "$bb" "$work/busybox/bin/busybox"
for a in $("$bb" --list); do [ "$a" = busybox ] || ln -sf busybox "$work/busybox/bin/$a"; done
$mk -o "$STATE/images/busybox.tar" -t "$BUSYBOX_IMAGE" -root "$work/busybox" -cmd sh
# The same busybox under the name README.md's install section uses.
$mk -o "$STATE/images/busybox-readme.tar" -t docker.io/library/busybox:1.37 -root "$work/busybox" -cmd sh

GPUDRA_IMAGE_BIN_DIR="$STATE/bin" "$root/hack/image.sh" "$STATE/images/gpudra.tar" "$PLUGIN_IMAGE_REPO:$PLUGIN_IMAGE_TAG"
