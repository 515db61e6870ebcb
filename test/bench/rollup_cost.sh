#!/usr/bin/env bash
# rollup_cost.sh: what keeping the rollups costs ClickHouse while port_samples
# rows are inserted (BENCHMARKS.md section 12), three ways side by side:
#   - "views": the materialized views of migration 0005 (created here from
#     its text), which aggregate every INSERT block as it comes;
#   - "rolled": what the sink does since 0012, one INSERT ... SELECT per
#     range of closed minutes over port_samples FINAL (schemas/ddl/rollups),
#     then the hours from the minutes;
#   - "none": port_samples alone.
# It needs a ClickHouse of your own (deploy/clickhouse/local.sh up: its
# server CPU is read from /proc) and a database the ingest benchmark kept:
#
#   go build -o /tmp/ingest ./test/bench/cmd/ingest
#   /tmp/ingest --rounds 1 --keep          # SHOW DATABASES names it
#   test/bench/rollup_cost.sh default_ingest_<n>_new
#
# It copies the table's rows into two Memory tables: "fleet" (the make-run
# fleet: 128 ports, 6 rows per port and minute) and "spread" (every row a
# port of its own, as a block of a large fleet at a 1 s interval is), and
# inserts one of them 10 times back to back, each copy 10 minutes later than
# the one before (distinct rows, as a fleet sends), then rolls (for
# "rolled"), then waits 30 s for the merges. CPU is the server's user+system
# time in ticks (10 ms). The views are dropped again at the end.
set -euo pipefail
db=${1:?usage: rollup_cost.sh DATABASE (one /tmp/ingest --keep left)}
here=$(cd "$(dirname "$0")/../.." && pwd)
pid=$(cat "${RDMAWATCH_CH_DIR:-$here/.clickhouse}/clickhouse.pid")
port=${RDMAWATCH_CH_TCP_PORT:-19000}
ch() { clickhouse-client --port "$port" -d "$db" "$@"; }
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }

# The columns the sink writes (every stored column but the DEFAULT ones
# derived from the old arrays), ts and time_ms first.
cols=$(ch -q "SELECT arrayStringConcat(groupArray(name), ', ') FROM (SELECT name FROM system.columns WHERE database = '$db' AND table = 'port_samples' AND default_kind IN ('', 'DEFAULT') AND name NOT LIKE 'counter\\_%' AND name NOT IN ('ts', 'time_ms', 'rx_prio_pause', 'tx_prio_pause', 'rx_prio_pause_duration_us', 'tx_prio_pause_duration_us'))")
ch -q "DROP TABLE IF EXISTS rc_fleet"
ch -q "DROP TABLE IF EXISTS rc_spread"
# In time order: 128 rows in a row are the 128 ports at one time, which
# "spread" makes 128 ports of their own.
ch -q "CREATE TABLE rc_fleet ENGINE = Memory AS SELECT ts, time_ms, $cols FROM port_samples ORDER BY time_ms, node, device, port"
spread_cols=${cols/node,/concat(node, toString(intDiv(rowNumberInAllBlocks(), 128))) AS node,}
ch -q "CREATE TABLE rc_spread ENGINE = Memory AS SELECT ts, time_ms, $spread_cols FROM rc_fleet"
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
	for i in $(seq 0 9); do
		ch -q "INSERT INTO port_samples (ts, time_ms, $cols) SELECT ts + $((i * 600)), time_ms + $((i * 600000)), $cols FROM $2"
	done
	b=$(cpu)
	if [ "$1" = rolled ]; then roll minute; roll hour; fi
	c=$(cpu)
	sleep 30
	d=$(cpu)
	echo "$1 $2: 10 inserts $((b - a)) ticks, rolling $((c - b)) ticks, the 30 s after $((d - c)) ticks, total $((d - a)) ticks"
}
for round in 1 2; do
	for src in rc_fleet rc_spread; do
		for way in views rolled none; do run $way $src; done
	done
done
truncate_all
ch -q "DROP TABLE rc_fleet"
ch -q "DROP TABLE rc_spread"
