#!/usr/bin/env bash
# Prints the path of promtool, Prometheus' own rule checker and tester,
# getting it once into $GPUDRA_CACHE (default ~/.cache/gpudra) from
# Debian's prometheus package: the .deb is downloaded and unpacked there
# (nothing is installed, no daemon starts), keyed by the package version.
# PROMTOOL=/path/to/promtool skips all of it. As root it runs apt-get
# update when the package lists are empty (a fresh machine).
set -euo pipefail
if [ -n "${PROMTOOL:-}" ]; then echo "$PROMTOOL"; exit 0; fi
CACHE=${GPUDRA_CACHE:-$HOME/.cache/gpudra}
log() { echo "[promtool] $*" >&2; }

candidate() { apt-cache policy prometheus 2>/dev/null | awk '$1 == "Candidate:" && $2 != "(none)" {print $2}'; }
command -v apt-cache >/dev/null || { log "no apt: install promtool (Prometheus 2.x or 3.x) and set PROMTOOL"; exit 1; }
version=$(candidate)
if [ -z "$version" ]; then
  if [ "$(id -u)" -ne 0 ]; then log "Debian's prometheus package is unknown to apt: run apt-get update as root, or set PROMTOOL"; exit 1; fi
  log "apt-get update (no package lists yet)"
  apt-get update -qq >&2
  version=$(candidate)
  [ -n "$version" ] || { log "no prometheus package in this machine's apt sources; set PROMTOOL"; exit 1; }
fi
dir="$CACHE/promtool-${version//[^A-Za-z0-9.+~-]/_}"
if [ ! -x "$dir/promtool" ]; then
  t0=$SECONDS
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && apt-get download -qq "prometheus=$version" 2>/dev/null) || { log "apt-get download prometheus=$version failed"; exit 1; }
  dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
  mkdir -p "$CACHE"
  stage=$(mktemp -d "$CACHE/.tmp-promtool-XXXXXX")
  cp "$tmp/x/usr/bin/promtool" "$stage/promtool"
  chmod 755 "$stage"; rm -rf "$dir"; mv "$stage" "$dir"
  log "promtool $version unpacked into $dir in $((SECONDS - t0)) s"
fi
echo "$dir/promtool"
