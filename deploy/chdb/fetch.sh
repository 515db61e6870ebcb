#!/usr/bin/env bash
# Fetches the chDB library -- ClickHouse 26.x built as libchdb.so -- for the
# modern-ClickHouse test tier (`make test-modern`), once: it is cached under
# .cache/chdb/VERSION (gitignored). Prints the library's path. The npm
# registry serves it (@chdb/lib-linux-x64-gnu, 178 MB packed, 566 MB
# unpacked); without npm the registry's tarball is fetched with curl. Any
# failure exits non-zero: the tier fails, it does not skip.
set -euo pipefail
VERSION=${CHDB_VERSION:-26.7.3-stable.1}
# sha1 of the registry's tarball for the default version (npm's "shasum").
SHA1_26_7_3_stable_1=d2905fafd0e0ac0e231cccadd1f0f6d010977297
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${RDMAWATCH_CHDB_CACHE:-$root/.cache/chdb}/$VERSION
lib=$dir/package/libchdb.so
if [ ! -s "$lib" ]; then
  mkdir -p "$dir"
  cd "$dir"
  tgz=chdb-lib-linux-x64-gnu-$VERSION.tgz
  echo "chdb: fetching @chdb/lib-linux-x64-gnu@$VERSION (178 MB) into $dir" >&2
  if command -v npm >/dev/null 2>&1; then
    npm pack --silent "@chdb/lib-linux-x64-gnu@$VERSION" >/dev/null
  else
    # A fresh Debian may have neither npm nor curl: curl is the small one.
    if ! command -v curl >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "chdb: installing curl (apt-get)" >&2
      apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl ca-certificates >&2
    fi
    curl -fsSL -o "$tgz" "https://registry.npmjs.org/@chdb/lib-linux-x64-gnu/-/lib-linux-x64-gnu-$VERSION.tgz"
  fi
  want_var="SHA1_${VERSION//[.-]/_}"
  if [ -n "${!want_var:-}" ]; then
    got=$(sha1sum "$tgz" | cut -d' ' -f1)
    if [ "$got" != "${!want_var}" ]; then
      echo "chdb: $tgz has sha1 $got, want ${!want_var}" >&2
      rm -f "$tgz"
      exit 1
    fi
  fi
  tar xzf "$tgz" package/libchdb.so
  rm -f "$tgz"
fi
echo "$lib"
