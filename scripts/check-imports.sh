#!/usr/bin/env bash
# check-imports.sh [-w] FILE...: each import block must read as
# `goimports -local github.com/floodgate/floodgate` groups it once its blank
# lines are removed: the standard library, then other modules, then this
# project, each group once. (goimports alone keeps any group a file already
# has, so a project import parked in a group of its own would pass it.)
# With -w the files are rewritten that way; without, the files that need it
# are listed and the script exits 1.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
write=false
if [ "${1:-}" = "-w" ]; then write=true; shift; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -modfile="$here/tools/goimports/go.mod" -o "$tmp/goimports" golang.org/x/tools/cmd/goimports
for f in "$@"; do
	mkdir -p "$tmp/tree/$(dirname "$f")"
	# Drop the blank lines inside `import (` ... `)`, keep everything else.
	awk '/^import \($/ {inblock=1} inblock && /^\)$/ {inblock=0} !(inblock && /^[[:space:]]*$/)' "$f" >"$tmp/tree/$f"
done
"$tmp/goimports" -local github.com/floodgate/floodgate -w "$tmp/tree"
bad=()
for f in "$@"; do
	if ! cmp -s "$f" "$tmp/tree/$f"; then
		if $write; then cp "$tmp/tree/$f" "$f"; else bad+=("$f"); fi
	fi
done
if [ ${#bad[@]} -gt 0 ]; then
	echo "imports need grouping (make fmt):"
	printf '%s\n' "${bad[@]}"
	exit 1
fi
