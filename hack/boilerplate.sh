#!/usr/bin/env bash
# The license header (hack/boilerplate.go.txt) on every Go file of the
# repository, all modules included. The header comes first, after the build
# constraints if the file has any (gofmt keeps //go:build at the top);
# generated files get it from their generator (make generate).
#
#   hack/boilerplate.sh verify   list the files without it; fail if any (make verify)
#   hack/boilerplate.sh update   add it to those files (re-runnable: files that
#                                have it are left alone)
set -euo pipefail
cd "$(dirname "$0")/.."
header=hack/boilerplate.go.txt
mode=${1:-verify}

# has_header FILE: the header follows the leading build constraints.
has_header() {
  awk 'BEGIN { n = 0; i = 0 } NR==FNR { want[n++] = $0; next }
       !started && (/^\/\/go:build / || /^\/\/ \+build / || /^$/) { next }
       { started = 1; if ($0 != want[i]) exit 1; if (++i == n) exit 0 }
       END { if (i < n) exit 1 }' "$header" "$1"
}

missing=()
while IFS= read -r f; do
  [ -f "$f" ] || continue
  has_header "$f" || missing+=("$f")
done < <(git ls-files --cached --others --exclude-standard '*.go')

case $mode in
  verify)
    if [ ${#missing[@]} -gt 0 ]; then
      echo "boilerplate: these Go files lack the license header of $header (fix: hack/boilerplate.sh update):"
      printf '  %s\n' "${missing[@]}"
      exit 1
    fi ;;
  update)
    for f in "${missing[@]}"; do
      tmp=$(mktemp)
      awk -v header="$header" '
        function put() { while ((getline l < header) > 0) print l; print ""; done = 1 }
        !done && (/^\/\/go:build / || /^\/\/ \+build /) { print; constraints = 1; next }
        !done && constraints && /^$/ { print; put(); next }
        !done { put() }
        { print }' "$f" >"$tmp"
      cat "$tmp" >"$f"; rm -f "$tmp"
      echo "boilerplate: added the header to $f"
    done ;;
  *) echo "usage: $0 verify|update" >&2; exit 2 ;;
esac
