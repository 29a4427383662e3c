#!/usr/bin/env bash
# lines.sh: the product's size in lines, per package: the non-test,
# non-generated Go of every package of this module linked into the binary
# (./cmd/floodgate) or the client library (./client/...), plus the Lua
# those packages embed; then, apart, the test-support packages, which only
# tests import.
#
# A package is test support by its place: under internal/testkit/, or named
# like the standard library's httptest (its last path element ends in
# "test": store/storetest, internal/redistest, ...). e2e/, bench/ and
# deploy/ are not the product. internal/testkit/layout_test.go keeps the
# two sets apart (no product package imported only by tests).
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)

support() { # import path -> 0 if test support
	local p=${1#"$mod"/}
	case "$p" in
	internal/testkit | internal/testkit/*) return 0 ;;
	e2e | e2e/*) return 0 ;;
	*test) return 0 ;;
	esac
	return 1
}

# count DIR FILE...: lines of the files that are not generated code.
count() {
	local dir=$1 n=0 f
	shift
	for f in "$@"; do
		# Go's marker of generated code: a line of its own before the package clause.
		if sed '/^package /q' "$dir/$f" | grep -q '^// Code generated .* DO NOT EDIT\.$'; then continue; fi
		n=$((n + $(wc -l <"$dir/$f")))
	done
	echo "$n"
}

fmt='{{if .Module}}{{if eq .Module.Path "'$mod'"}}{{.ImportPath}}	{{.Dir}}	{{join .GoFiles " "}}	{{join .EmbedFiles " "}}{{"\n"}}{{end}}{{end}}'

table() { # title, then lines "path dir gofiles embedfiles" on stdin
	local title=$1 total_go=0 total_lua=0 rows=""
	local path dir gofiles embeds go lua luafiles
	while IFS=$'\t' read -r path dir gofiles embeds; do
		# shellcheck disable=SC2086
		go=$(count "$dir" $gofiles)
		luafiles=$(tr ' ' '\n' <<<"$embeds" | grep '\.lua$' || true)
		# shellcheck disable=SC2086
		lua=$( [ -n "$luafiles" ] && count "$dir" $luafiles || echo 0)
		[ $((go + lua)) -eq 0 ] && continue
		total_go=$((total_go + go))
		total_lua=$((total_lua + lua))
		rows+=$(printf '%7d %7d  %s' "$go" "$lua" "${path#"$mod"/}")$'\n'
	done
	echo "$title"
	printf '%7s %7s  %s\n' Go Lua package
	printf '%s' "$rows" | sort -rn
	printf '%7d %7d  total (%d lines)\n\n' "$total_go" "$total_lua" $((total_go + total_lua))
}

product=$(go list -deps -f "$fmt" ./cmd/floodgate ./client/... | while IFS=$'\t' read -r path rest; do
	support "$path" || printf '%s\t%s\n' "$path" "$rest"
done)
testsupport=$(go list -f "$fmt" ./... | while IFS=$'\t' read -r path rest; do
	if support "$path" && [[ $path != "$mod"/e2e* ]]; then printf '%s\t%s\n' "$path" "$rest"; fi
done)

table "product: linked into ./cmd/floodgate or ./client/..." <<<"$product"
table "test support: imported only by tests" <<<"$testsupport"
