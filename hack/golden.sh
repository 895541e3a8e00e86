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
fail=0
while read -r pkg tests; do
  tests=$(echo "$tests" | tr -s ' ' '|')
  go test "$pkg" -run "^($tests)\$" "${flags[@]}" || fail=1
done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' hack/golden-tests)
if [ "$mode" = update ]; then
  git status --short -- '*testdata*' docs README.md deployments
fi
exit $fail
