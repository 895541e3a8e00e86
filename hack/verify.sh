#!/usr/bin/env bash
# make verify: every check that reads the code without running it, on all
# of the repository's modules, in one pass that reports every failure (not
# just the first) and the time each check took:
#
#   boilerplate   the license header on every Go file (hack/boilerplate.sh)
#   gofmt         gofmt -s
#   imports       three import groups: standard library, others, this
#                 module's (gci; goimports -local accepts a file whose own
#                 packages sit in the middle group)
#   vet           go vet, the e2e, chaos, multinode and chart build tags
#                 included
#   staticcheck   staticcheck's default checks
#   logcheck      contextual logging (sigs.k8s.io/logtools): no global klog
#                 calls, and no klog.Background() or klog.TODO() outside
#                 package main: a logger comes from the caller's context
#   tidy          go mod tidy would change no go.mod or go.sum
#   generate      generated code is up to date (hack/verify-generate.sh)
#   golden        the golden tests of hack/golden-tests pass (go test's cache
#                 makes this free when nothing changed)
#   nocgo         the CLI for laptops: cmd/gpudra builds with CGO_ENABLED=0
#                 for darwin/arm64, windows/amd64 and linux/amd64, and its
#                 tests of that build pass (no NVML subcommands)
#   misspell      no common misspelling (golangci/misspell, its neutral
#                 locale: British and American spellings both pass) in Go
#                 files and Markdown, testdata excepted
#
#   hack/verify.sh [CHECK...]   (default: all)
#
# The mechanical fixes are `make fix` (header, gofmt -s, import groups);
# the rest say what to change. Linters are built once into $GPUDRA_CACHE
# (hack/tools.sh). Runs the checks one after the other: each is parallel
# on its own, and two cores are all CI has.
set -uo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=1 CGO_CFLAGS=${CGO_CFLAGS:--Wno-deprecated-declarations} GOWORK=off
# The modules whose code is checked (hack/localcluster/modules/* only pin
# what build.sh builds).
modules=(. hack/kind hack/mkimage)
# Every build tag of the repository: the e2e, chaos and multi-node suites,
# the chart tests that need helm.
tags=e2e,chaos,multinode,chart
local_prefix=github.com/gpudra/gpudra

go_files() { git ls-files --cached --others --exclude-standard '*.go' | while read -r f; do [ -f "$f" ] && echo "$f"; done; }

check_boilerplate() { hack/boilerplate.sh verify; }

check_gofmt() {
  local out; out=$(go_files | xargs gofmt -s -l)
  [ -z "$out" ] && return
  echo "gofmt -s would change (fix: make fix):"; echo "$out"; return 1
}

check_imports() {
  local gci out; gci=$(hack/tools.sh gci) || return
  out=$(go_files | grep -v '^hack/localcluster/modules/' | xargs "$gci" list --skip-generated \
    -s standard -s default -s "prefix($local_prefix)")
  [ -z "$out" ] && return
  echo "imports not in three groups (standard library, others, $local_prefix) (fix: make fix):"; echo "$out"; return 1
}

check_vet() {
  local fail=0
  go vet ./... || fail=1
  go vet -tags e2e ./e2e/ || fail=1
  go vet -tags "e2e chaos" ./e2e/ || fail=1
  go vet -tags "e2e multinode" ./e2e/ || fail=1
  go vet -tags chart ./deployments/helm/gpudra/ || fail=1
  for m in "${modules[@]:1}"; do (cd "$m" && go vet ./...) || fail=1; done
  return $fail
}

check_staticcheck() {
  local sc fail=0; sc=$(hack/tools.sh staticcheck) || return
  for m in "${modules[@]}"; do (cd "$m" && "$sc" -tags "$tags" ./...) || fail=1; done
  return $fail
}

check_logcheck() {
  local lc fail=0 out; lc=$(hack/tools.sh logcheck) || return
  GOFLAGS="${GOFLAGS:-} -tags=$tags" "$lc" -check-contextual ./... || fail=1
  # logcheck allows klog.Background() and klog.TODO() anywhere; this
  # project allows them only where a binary makes its root logger.
  out=$(git grep -n -E 'klog\.(Background|TODO)\(\)' -- '*.go' ':!cmd/')
  if [ -n "$out" ]; then
    echo "klog.Background()/klog.TODO() outside package main: take the logger from the context (klog.FromContext) or the caller; tests use ktesting:"
    echo "$out"; fail=1
  fi
  return $fail
}

check_tidy() {
  local fail=0
  for m in "${modules[@]}"; do (cd "$m" && go mod tidy -diff) || { echo "go mod tidy would change go.mod or go.sum in $m (fix: (cd $m && go mod tidy))"; fail=1; }; done
  return $fail
}

check_generate() { hack/verify-generate.sh; }

check_golden() { hack/golden.sh verify; }

check_nocgo() {
  local fail=0 out; out=$(mktemp -d)
  for p in darwin/arm64 windows/amd64 linux/amd64; do
    CGO_ENABLED=0 GOOS=${p%/*} GOARCH=${p#*/} go build -o "$out/gpudra-${p/\//-}" ./cmd/gpudra ||
      { echo "CGO_ENABLED=0 GOOS=${p%/*} GOARCH=${p#*/} go build ./cmd/gpudra failed: something NVML (cgo) reached a subcommand of the laptop build (see cmd/gpudra/nvml_cgo.go)"; fail=1; }
  done
  rm -rf "$out"
  CGO_ENABLED=0 go test -count=1 ./cmd/gpudra/ || fail=1
  return $fail
}

# Every Go file (comments, strings and names) and every Markdown page: the
# docs, the READMEs (the chart's included), CHANGELOG.md, the flag pages.
# testdata holds copies of what other tools print, not our words. The
# neutral locale because the project writes British English and quotes
# American (Kubernetes' field and flag names): -locale US would flag
# "behaviour", -locale UK "canceled".
check_misspell() {
  local ms; ms=$(hack/tools.sh misspell) || return
  git ls-files --cached --others --exclude-standard '*.go' '*.md' | grep -v -E '(^|/)testdata/' |
    while read -r f; do [ -f "$f" ] && echo "$f"; done | xargs "$ms" -error ||
    { echo "misspellings above (fix by hand, or $ms -w FILE)"; return 1; }
}

all=(boilerplate gofmt imports vet staticcheck logcheck tidy generate golden nocgo misspell)
checks=("$@"); [ ${#checks[@]} -eq 0 ] && checks=("${all[@]}")
failed=()
for c in "${checks[@]}"; do
  if ! declare -F "check_$c" >/dev/null; then echo "verify: no check $c (have: ${all[*]})" >&2; exit 2; fi
  t0=$SECONDS
  if "check_$c"; then status=ok; else status=FAILED; failed+=("$c"); fi
  echo "[verify] $c: $status ($((SECONDS - t0)) s)"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "[verify] FAILED: ${failed[*]}"
  exit 1
fi
echo "[verify] all ${#checks[@]} checks passed"
