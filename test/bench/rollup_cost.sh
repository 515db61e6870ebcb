#!/usr/bin/env bash
# rollup_cost.sh: what keeping the rollups costs ClickHouse while port_samples
# rows are inserted (rollup-views-cost in BENCHMARKS.md), three ways side by side:
#   - "views": the materialized views of migration 0005 (created here from
#     its text), which aggregate every INSERT block as it comes;
#   - "rolled": what the sink does since 0012, one INSERT ... SELECT per
#     range of closed minutes over port_samples FINAL (schemas/ddl/rollups),
#     then the hours from the minutes;
#   - "none": port_samples alone.
# It needs a ClickHouse of your own (deploy/clickhouse/local.sh up: its
# server CPU is read from /proc) and a database of its own holding the
# make-run fleet's port_samples rows (92 154; its tables are truncated, the
# rows put back at the end):
#
#   make build
#   RDMAWATCH_CLICKHOUSE=clickhouse://127.0.0.1:19000/rollup_cost bin/rdmawatch run --speed 0 --no-progress
#   test/bench/rollup_cost.sh rollup_cost
#
# It copies the table's rows into two Memory tables: "fleet" (the make-run
# fleet: 128 ports at 10 s), inserted 10 times back to back, each copy 10
# minutes later (distinct rows, 6 per port and minute), and "second" (the
# same rows as 46 080 ports at 1 s: 6 seconds of them), inserted 10 times,
# each copy 6 s later: one minute of a 46 080-port fleet, 60 rows per port,
# each INSERT holding every port about 6 times, as the sink's blocks of a
# large fleet do. Then it rolls (for "rolled") and waits 30 s for merges. CPU is the server's user+system
# time in ticks (10 ms), ROUNDS times (default 1). The views are dropped
# again at the end.
set -euo pipefail
db=${1:?usage: rollup_cost.sh DATABASE (one that bin/rdmawatch run --speed 0 filled)}
here=$(cd "$(dirname "$0")/../.." && pwd)
pid=$(cat "${RDMAWATCH_CH_DIR:-$here/.clickhouse}/clickhouse.pid")
port=${RDMAWATCH_CH_TCP_PORT:-19000}
ch() { clickhouse-client --port "$port" -d "$db" "$@"; }
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }

# The columns the sink writes (every stored column but the DEFAULT ones
# derived from the old arrays), ts and time_ms first.
cols=$(ch -q "SELECT arrayStringConcat(groupArray(name), ', ') FROM (SELECT name FROM system.columns WHERE database = '$db' AND table = 'port_samples' AND default_kind IN ('', 'DEFAULT') AND name NOT LIKE 'counter\\_%' AND name NOT IN ('ts', 'time_ms', 'rx_prio_pause', 'tx_prio_pause', 'rx_prio_pause_duration_us', 'tx_prio_pause_duration_us'))")
ch -q "DROP TABLE IF EXISTS rc_fleet"
ch -q "DROP TABLE IF EXISTS rc_second"
# In time order: 128 rows in a row are the 128 ports at one time, which
# "spread" makes 128 ports of their own.
ch -q "CREATE TABLE rc_fleet ENGINE = Memory AS SELECT ts, time_ms, $cols FROM port_samples ORDER BY time_ms, node, device, port"
second_cols=${cols/node,/concat(node, toString(intDiv(rowNumberInAllBlocks(), 128) % 360)) AS node,}
t0=$(ch -q "SELECT toUInt32(min(ts)) FROM rc_fleet")
ch -q "CREATE TABLE rc_second ENGINE = Memory AS SELECT toDateTime($t0 + intDiv(rowNumberInAllBlocks(), 128 * 360)) AS ts, toInt64(toUInt32(ts)) * 1000 AS time_ms, $second_cols FROM rc_fleet"
echo "rows: $(ch -q "SELECT count() FROM rc_fleet")"
read -r lo hi < <(ch -q "SELECT toUInt32(min(ts)), toUInt32(max(ts)) + 10 * 600 + 60 FROM rc_fleet" | tr '\t' ' ')

# The views of 0005, as they were created then.
views=$(awk '/^CREATE MATERIALIZED VIEW/,/;$/' "$here/schemas/ddl/migrations/0005_rollups.sql")
drop_views() {
	ch -q "DROP TABLE IF EXISTS port_minute_mv"
	ch -q "DROP TABLE IF EXISTS port_hour_mv"
}
trap drop_views EXIT
roll() { # file: the roll statement over the whole data, parameters bound
	grep -v '^--' "$here/schemas/ddl/rollups/$1.sql" | sed "s/@from/$lo/; s/@to/$hi/" | ch
}
truncate_all() {
	for t in port_samples port_minute port_hour rollup_minute rollup_hour; do ch -q "TRUNCATE TABLE $t"; done
}
run() { # way source
	truncate_all
	drop_views
	[ "$1" = views ] && printf '%s\n' "$views" | awk 'BEGIN{RS=";"} NF{print > "/tmp/rc_view_" NR ".sql"}' && for f in /tmp/rc_view_*.sql; do ch < "$f"; rm -f "$f"; done
	sleep 1
	local a b c d
	a=$(cpu)
	local step=600
	[ "$2" = rc_second ] && step=6
	for i in $(seq 0 9); do
		ch -q "INSERT INTO port_samples (ts, time_ms, $cols) SELECT ts + $((i * step)), time_ms + $((i * step * 1000)), $cols FROM $2"
	done
	b=$(cpu)
	if [ "$1" = rolled ]; then roll minute; roll hour; fi
	c=$(cpu)
	sleep 30
	d=$(cpu)
	echo "$1 $2: 10 inserts $((b - a)) ticks, rolling $((c - b)) ticks, the 30 s after $((d - c)) ticks, total $((d - a)) ticks"
}
for _ in $(seq "${ROUNDS:-1}"); do
	for src in rc_fleet rc_second; do
		for way in views rolled none; do run $way $src; done
	done
done
# The kept rows back, so the script can run again.
truncate_all
ch -q "INSERT INTO port_samples (ts, time_ms, $cols) SELECT ts, time_ms, $cols FROM rc_fleet"
ch -q "DROP TABLE rc_fleet"
ch -q "DROP TABLE rc_second"
