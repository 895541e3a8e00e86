#!/usr/bin/env bash
# Runs every golden test listed in hack/golden-tests:
#
#   hack/golden.sh update   with -update: rewrite the golden files from the
#                           current code (make golden); review the diff
#   hack/golden.sh verify   without: fail when a golden file is out of date
#                           (make verify; go test's cache skips what did not
#                           change)
#
# A test that compares with golden files through internal/gpudratest and is
# missing from hack/golden-tests fails, so this list is complete.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-verify}
case $mode in
  update) flags=(-count=1 -update) ;;
  verify) flags=() ;;
  *) echo "usage: $0 update|verify" >&2; exit 2 ;;
esac
# One go test for all of them (it builds and runs packages in parallel,
# and answers from its cache at once): every package with the union of the
# test names.
pkgs=() tests=()
while read -r pkg names; do
  pkgs+=("$pkg"); tests+=($names)
done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' hack/golden-tests)
run=$(IFS='|'; echo "^(${tests[*]})\$")
fail=0
go test "${pkgs[@]}" -run "$run" "${flags[@]}" || fail=1
if [ "$mode" = update ]; then
  git status --short -- '*testdata*' docs README.md deployments
fi
exit $fail
