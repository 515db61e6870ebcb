#!/usr/bin/env bash
# Installs the real services and tools the tests run against, when missing:
# Alertmanager (the alert bridge's end-to-end test), promtool (metrics and
# rules checks) and rsvg-convert (to look at postmortem plots). Debian's
# packages, as root; elsewhere it says what is missing and exits 0, and the
# tests that need a tool skip with the reason.
set -euo pipefail
want=()
command -v prometheus-alertmanager >/dev/null 2>&1 || command -v alertmanager >/dev/null 2>&1 || want+=(prometheus-alertmanager)
command -v promtool >/dev/null 2>&1 || want+=(prometheus)
command -v rsvg-convert >/dev/null 2>&1 || want+=(librsvg2-bin)
command -v systemd-analyze >/dev/null 2>&1 || want+=(systemd)
[ ${#want[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "tools.sh: missing ${want[*]}; install them (Debian: apt-get install ${want[*]}) or the tests that need them skip" >&2
  exit 0
fi
echo "tools.sh: installing ${want[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# The packages' own services are not started (no init here; policy-rc.d may deny it): the tests start private ones.
apt-get install -y --no-install-recommends "${want[@]}" >/dev/null 2>&1 || {
  apt-get update >/dev/null && apt-get install -y --no-install-recommends "${want[@]}" >/dev/null
}
