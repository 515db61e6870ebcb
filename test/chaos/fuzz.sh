#!/usr/bin/env bash
# fuzz.sh: run every Fuzz* target of the module for a bounded time each, and
# fail when any of them finds a crash. Targets are found, not listed by hand,
# so a new FuzzXxx runs in CI the day it is written.
#
#   FUZZTIME   time per target, a go test -fuzztime value (default 10s)
#   FUZZPKGS   packages to search (default ./...)
#   FUZZMATCH  only targets whose name matches this regexp (default: all)
#
# A crash leaves its input in the package's testdata/fuzz/<Target>/ (go test
# writes it there): commit it, it becomes a regression seed. The summary
# lists every target with its result; the exit status is 1 when one failed.
set -uo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$script_dir/../.." && pwd)
cd "$repo_root"

fuzztime=${FUZZTIME:-10s}
pkgs=${FUZZPKGS:-./...}
match=${FUZZMATCH:-.}
go=${GO:-go}

# `go test -list` prints a package's matching names, then its "ok <pkg>"
# line; a package that does not build prints FAIL, which is a failure here
# too (a target that cannot run is not a target that passed).
list=$("$go" test -list '^Fuzz' $pkgs 2>&1)
if [[ $? -ne 0 ]]; then
	echo "fuzz.sh: go test -list failed:" >&2
	echo "$list" >&2
	exit 1
fi
targets=()
names=()
while IFS= read -r line; do
	case $line in
	Fuzz*) names+=("$line") ;;
	ok*)
		pkg=$(awk '{print $2}' <<<"$line")
		for n in "${names[@]}"; do
			[[ $n =~ $match ]] && targets+=("$pkg $n")
		done
		names=()
		;;
	*) names=() ;;
	esac
done <<<"$list"

if [[ ${#targets[@]} -eq 0 ]]; then
	echo "fuzz.sh: no Fuzz targets found in $pkgs matching $match" >&2
	exit 1
fi

echo "fuzz.sh: ${#targets[@]} targets, $fuzztime each"
failed=()
summary=()
start=$SECONDS
for t in "${targets[@]}"; do
	pkg=${t% *}
	name=${t#* }
	t0=$SECONDS
	echo "=== $name ($pkg)"
	if "$go" test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"; then
		summary+=("ok    $name ($pkg) $((SECONDS - t0))s")
	else
		summary+=("FAIL  $name ($pkg) $((SECONDS - t0))s: the crashing input is under $(go list -f '{{.Dir}}' "$pkg" 2>/dev/null)/testdata/fuzz/$name/")
		failed+=("$name")
	fi
done
echo
echo "fuzz.sh: summary ($((SECONDS - start))s)"
printf '  %s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
	echo "fuzz.sh: ${#failed[@]} of ${#targets[@]} targets failed: ${failed[*]}" >&2
	exit 1
fi
