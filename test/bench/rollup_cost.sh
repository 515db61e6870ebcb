#!/usr/bin/env bash
# rollup_cost.sh: where ClickHouse's CPU goes when port_samples rows are
# inserted (BENCHMARKS.md section 12). It needs a ClickHouse of your own
# (deploy/clickhouse/local.sh up: its server CPU is read from /proc) and a
# database the ingest benchmark kept:
#
#   go build -o /tmp/ingest ./test/bench/cmd/ingest
#   /tmp/ingest --rounds 1 --keep          # prints nothing of the name: see SHOW DATABASES
#   test/bench/rollup_cost.sh default_ingest_<n>_new
#
# It copies the table's rows into two Memory tables: "fleet" (the make-run
# fleet: 128 ports, 6 rows per port and minute) and "spread" (every row a
# port of its own, as a block of a large fleet at a 1 s interval is: the
# rollup views then aggregate nothing), and inserts them with INSERT ...
# SELECT (no client parsing in the figure), 3 times each:
#   - with both rollup views, with only the minute one, with none;
#   - 10 inserts back to back and the 30 s after (the merges they cause).
# CPU is the server's user+system time in ticks (10 ms). The views are
# detached and attached again; the database is left as it was otherwise.
set -euo pipefail
db=${1:?usage: rollup_cost.sh DATABASE (one /tmp/ingest --keep left)}
here=$(cd "$(dirname "$0")/../.." && pwd)
pid=$(cat "${RDMAWATCH_CH_DIR:-$here/.clickhouse}/clickhouse.pid")
port=${RDMAWATCH_CH_TCP_PORT:-19000}
ch() { clickhouse-client --port "$port" -d "$db" "$@"; }
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }

# The columns the sink writes (every stored column but the DEFAULT ones
# derived from the old arrays).
cols=$(ch -q "SELECT arrayStringConcat(groupArray(name), ', ') FROM (SELECT name FROM system.columns WHERE database = '$db' AND table = 'port_samples' AND default_kind IN ('', 'DEFAULT') AND name NOT LIKE 'counter\\_%' AND name NOT IN ('rx_prio_pause', 'tx_prio_pause', 'rx_prio_pause_duration_us', 'tx_prio_pause_duration_us'))")
ch -q "DROP TABLE IF EXISTS rc_fleet"
ch -q "DROP TABLE IF EXISTS rc_spread"
# In time order: 128 rows in a row are the 128 ports at one time, which
# "spread" makes 128 ports of their own.
ch -q "CREATE TABLE rc_fleet ENGINE = Memory AS SELECT $cols FROM port_samples ORDER BY time_ms, node, device, port"
spread_cols=${cols/node,/concat(node, toString(intDiv(rowNumberInAllBlocks(), 128))) AS node,}
ch -q "CREATE TABLE rc_spread ENGINE = Memory AS SELECT $spread_cols FROM rc_fleet"
echo "rows: $(ch -q "SELECT count() FROM rc_fleet")"

truncate_all() {
	for t in port_samples port_minute port_hour; do ch -q "TRUNCATE TABLE $t"; done
}
once() { # label source: 3 inserts, each into emptied tables
	for i in 1 2 3; do
		truncate_all
		sleep 0.5
		local a b
		a=$(cpu)
		ch -q "INSERT INTO port_samples ($cols) SELECT $cols FROM $2"
		b=$(cpu)
		echo "$1 $2 $i: $((b - a)) ticks"
	done
}
sustained() { # label source: 10 inserts back to back, then 30 s
	truncate_all
	sleep 1
	local a b c
	a=$(cpu)
	for _ in $(seq 10); do ch -q "INSERT INTO port_samples ($cols) SELECT $cols FROM $2"; done
	b=$(cpu)
	sleep 30
	c=$(cpu)
	echo "$1 $2 sustained: 10 inserts $((b - a)) ticks, the 30 s after $((c - b)) ticks"
}
restore() {
	ch -q "ATTACH TABLE port_minute_mv" 2>/dev/null || true
	ch -q "ATTACH TABLE port_hour_mv" 2>/dev/null || true
}
trap restore EXIT

for src in rc_fleet rc_spread; do once "both views" $src; done
sustained "both views" rc_spread
ch -q "DETACH TABLE port_hour_mv"
once "minute view only" rc_spread
sustained "minute view only" rc_spread
ch -q "DETACH TABLE port_minute_mv"
for src in rc_fleet rc_spread; do once "no views" $src; done
sustained "no views" rc_spread
restore

# The minute rollup computed by a query over stored rows instead of a view.
sel=$(ch --format TSVRaw -q "SHOW CREATE TABLE port_minute_mv" | sed -n 's/.* AS SELECT \(.*\) FROM .*port_samples.*/\1/p')
truncate_all
ch -q "INSERT INTO port_samples ($cols) SELECT $cols FROM rc_fleet" # with the views: port_minute is refilled below
ch -q "TRUNCATE TABLE port_minute"
for i in 1 2 3; do
	a=$(cpu)
	ch -q "INSERT INTO port_minute SELECT $sel FROM port_samples WHERE first = 0 GROUP BY node, device, port, minute"
	b=$(cpu)
	echo "minute rollup by query over rc_fleet's rows $i: $((b - a)) ticks"
	ch -q "TRUNCATE TABLE port_minute"
done

# Aggregate state sizes of an hour of 1 s samples (3600 values) and of a minute.
for f in "quantilesState(0.5, 0.95)" "quantilesTDigestState(0.5, 0.95)"; do
	for n in 60 3600; do
		echo "$f of $n values: $(clickhouse-client --port "$port" -q "SELECT $f(0.3 + (number % 97) / 1000) FROM numbers($n) FORMAT RowBinary" | wc -c) bytes"
	done
done
ch -q "DROP TABLE rc_fleet"
ch -q "DROP TABLE rc_spread"
