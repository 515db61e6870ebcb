package report_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/report"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// trendsTopology: gpu-001 and gpu-002 on leaf-01, gpu-003 on leaf-02;
// racks put gpu-001 and gpu-003 in r01 and leave gpu-002 out (its group
// under --by rack is its leaf). gpu-009 is in no topology at all.
const trendsTopology = `{"fabric": "trends",
 "switches": [{"name": "leaf-01", "tier": "leaf"}, {"name": "leaf-02", "tier": "leaf"}, {"name": "spine-01", "tier": "spine"}],
 "links": [
  {"a": "gpu-001/mlx5_0/1", "b": "leaf-01/swp1"},
  {"a": "gpu-002/mlx5_0/1", "b": "leaf-01/swp2"},
  {"a": "gpu-003/mlx5_0/1", "b": "leaf-02/swp1"},
  {"a": "leaf-01/swp49", "b": "spine-01/swp1"},
  {"a": "leaf-02/swp49", "b": "spine-01/swp2"}],
 "racks": {"r01": ["gpu-001", "gpu-003"]}}`

// portHour is one rollup_hour row of a test: every port-hour moves 100
// Gb/s links for a whole hour.
type portHour struct {
	hour            time.Time
	node            string
	pauseS, discard uint64
	corrected, pcs  uint64 // of 1e12 PHY bits: pre-FEC BER corrected/1e12
	util            float64
}

// insertPortHours writes port-hours into rollup_hour as the sink's roll
// would: one aggregate state per column.
func insertPortHours(ctx context.Context, t *testing.T, conn driver.Conn, rows ...portHour) {
	t.Helper()
	for _, r := range rows {
		bytes := uint64(r.util * 100e9 / 8 * 3600)
		sql := fmt.Sprintf(`INSERT INTO rollup_hour (hour, node, device, port, rate_gbps, samples, interval_ms, rcv_bytes, xmit_bytes,
  port_xmit_discards, out_of_buffer, rx_bits_phy, rx_corrected_bits_phy, rx_pcs_symbol_err_phy,
  np_ecn_marked_roce_packets, np_cnp_sent, rp_cnp_handled, tx_pause_duration_us, rx_pause_duration_us, rolled_at)
SELECT toDateTime(%d), '%s', 'mlx5_0', toUInt16(1), arrayReduce('maxState', [toFloat64(100)]), toUInt64(360),
  arrayReduce('sumState', [toInt64(3600000)]), arrayReduce('sumState', [toUInt64(%d)]), arrayReduce('sumState', [toUInt64(%d)]),
  arrayReduce('sumState', [toUInt64(%d)]), arrayReduce('sumState', [toUInt64(2)]), arrayReduce('sumState', [toUInt64(1000000000000)]),
  arrayReduce('sumState', [toUInt64(%d)]), arrayReduce('sumState', [toUInt64(%d)]),
  arrayReduce('sumState', [toUInt64(5)]), arrayReduce('sumState', [toUInt64(3)]), arrayReduce('sumState', [toUInt64(3)]),
  arrayReduce('sumState', [toUInt64(%d)]), arrayReduce('sumState', [toUInt64(0)]), toDateTime(1)`,
			r.hour.Unix(), r.node, bytes, bytes/2, r.discard, r.corrected, r.pcs, r.pauseS*1000000)
		if err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("rollup_hour %s %s: %v", r.node, r.hour, err)
		}
	}
}

func trendsDB(t *testing.T) driver.Conn {
	t.Helper()
	conn := chtest.Open(t, chtest.NewDatabase(t, chtest.DSN(t)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := chdb.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	topo, err := schemas.ParseTopology(strings.NewReader(trendsTopology))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := chdb.LoadTopology(ctx, conn, topo); err != nil {
		t.Fatal(err)
	}
	day1 := time.UnixMilli(t0).UTC()
	day2 := day1.Add(24 * time.Hour)
	var hours []portHour
	for _, h := range []time.Time{day1, day1.Add(time.Hour), day2} {
		hours = append(hours,
			portHour{hour: h, node: "gpu-001", pauseS: 2, discard: 1, corrected: 1000000, pcs: 10, util: 0.5},
			portHour{hour: h, node: "gpu-002", pauseS: 1, discard: 0, corrected: 1000, pcs: 0, util: 0.1},
			portHour{hour: h, node: "gpu-003", pauseS: 0, discard: 4, corrected: 0, pcs: 0, util: 0.2},
			portHour{hour: h, node: "gpu-009", pauseS: 0, discard: 0, corrected: 0, pcs: 0, util: 0.3},
		)
	}
	insertPortHours(ctx, t, conn, hours...)
	// The day rollup, as the sink rolls it after the hours.
	if err := chdb.Roll(ctx, conn, chdb.Day, day1, day2.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	port := func(n string) schemas.Subject { return schemas.Subject{Node: n, Device: "mlx5_0", Port: 1} }
	ev := func(typ, id string, subj schemas.Subject, scope string, at time.Time) *schemas.Event {
		e := causeEvent(typ, id, subj, (at.UnixMilli()-t0)/1000, 1, nil)
		e.Scope = scope
		return e
	}
	insertEvents(ctx, t, conn,
		ev(schemas.TypePFCStorm, "pfc_storm/1", port("gpu-001"), schemas.ScopePort, day1.Add(30*time.Minute)),
		ev(schemas.TypePFCStorm, "pfc_storm/2", port("gpu-002"), schemas.ScopePort, day1.Add(70*time.Minute)),
		ev(schemas.TypeBERDrift, "ber_drift/1", port("gpu-001"), schemas.ScopePort, day1.Add(80*time.Minute)),
		// Node scope: counted in the node's leaf (leaf-01).
		ev(schemas.TypeReceiveStarvation, "receive_starvation/1", schemas.Subject{Node: "gpu-002"}, schemas.ScopeNode, day2.Add(10*time.Minute)),
		// Fabric scope: its own group, "fabric".
		ev(schemas.TypeCNPECNImbalance, "cnp_ecn_imbalance/1", schemas.Subject{}, schemas.ScopeFabric, day2.Add(20*time.Minute)),
		// Before --from: not counted.
		ev(schemas.TypeLinkFlap, "link_flap/1", port("gpu-003"), schemas.ScopePort, day1.Add(-2*time.Hour)),
	)
	return conn
}

// TestTrendsQuery: the trends query's groups, buckets, sums, BER and
// utilisation quantiles, and incidents by type, on a real 18.16.
func TestTrendsQuery(t *testing.T) {
	t.Parallel()
	conn := trendsDB(t)
	q, err := chdb.QueryByName("trends")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	from := time.UnixMilli(t0).UTC()
	base := report.Params{From: from, To: from.Add(48 * time.Hour)}
	day1, day2 := from.Format("2006-01-02 15"), from.Add(24*time.Hour).Format("2006-01-02 15")
	// Each row: bucket (to the hour), group, ports, tx_pause_s, discards,
	// pre-FEC BER worst, post-FEC BER worst, utilisation p95, incidents,
	// incidents_by_type.
	type row struct {
		bucket, group      string
		ports              uint64
		pauseS             float64
		discards           uint64
		preWorst, postWors float64
		utilP95            float64
		incidents          uint64
		byType             string
	}
	cases := []struct {
		name       string
		by, bucket string
		node       string
		want       []row
	}{
		{"leaf by day", "leaf", "day", "", []row{
			{day1, "gpu*", 1, 0, 0, 0, 0, 0.3, 0, ""},
			{day1, "leaf-01", 2, 6, 2, 1e-6, 1e-11, 0.5, 3, "ber_drift:1,pfc_storm:2"},
			{day1, "leaf-02", 1, 0, 8, 0, 0, 0.2, 0, ""},
			{day2, "fabric", 0, 0, 0, 0, 0, 0, 1, "cnp_ecn_imbalance:1"},
			{day2, "gpu*", 1, 0, 0, 0, 0, 0.3, 0, ""},
			{day2, "leaf-01", 2, 3, 1, 1e-6, 1e-11, 0.5, 1, "receive_starvation:1"},
			{day2, "leaf-02", 1, 0, 4, 0, 0, 0.2, 0, ""},
		}},
		{"rack by day, a node in no rack under its leaf", "rack", "day", "", []row{
			{day1, "gpu*", 1, 0, 0, 0, 0, 0.3, 0, ""},
			{day1, "leaf-01", 1, 2, 0, 1e-9, 0, 0.1, 1, "pfc_storm:1"},
			{day1, "r01", 2, 4, 10, 1e-6, 1e-11, 0.5, 2, "ber_drift:1,pfc_storm:1"},
			{day2, "fabric", 0, 0, 0, 0, 0, 0, 1, "cnp_ecn_imbalance:1"},
			{day2, "gpu*", 1, 0, 0, 0, 0, 0.3, 0, ""},
			{day2, "leaf-01", 1, 1, 0, 1e-9, 0, 0.1, 1, "receive_starvation:1"},
			{day2, "r01", 2, 2, 5, 1e-6, 1e-11, 0.5, 0, ""},
		}},
		{"fabric by hour", "fabric", "hour", "", []row{
			{day1, "fabric", 4, 3, 5, 1e-6, 1e-11, 0.5, 1, "pfc_storm:1"},
			{from.Add(time.Hour).Format("2006-01-02 15"), "fabric", 4, 3, 5, 1e-6, 1e-11, 0.5, 2, "ber_drift:1,pfc_storm:1"},
			{day2, "fabric", 4, 3, 5, 1e-6, 1e-11, 0.5, 2, "cnp_ecn_imbalance:1,receive_starvation:1"},
		}},
		{"node filter by week", "node", "week", "gpu-001", []row{
			// 2026-01-01 is a Thursday: its week starts on Monday 2025-12-29.
			{"2025-12-29 00", "gpu-001", 1, 6, 3, 1e-6, 1e-11, 0.5, 2, "ber_drift:1,pfc_storm:1"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := base
			p.By, p.Bucket, p.Node = tc.by, tc.bucket, tc.node
			res, err := report.RunQuery(ctx, conn, q, p)
			if err != nil {
				t.Fatal(err)
			}
			col := map[string]int{}
			for i, c := range res.Columns {
				col[c] = i
			}
			var got []row
			for _, r := range res.Rows {
				got = append(got, row{
					bucket:    r[col["bucket"]].(time.Time).UTC().Format("2006-01-02 15"),
					group:     r[col["group"]].(string),
					ports:     r[col["ports"]].(uint64),
					pauseS:    r[col["tx_pause_s"]].(float64),
					discards:  r[col["discards"]].(uint64),
					preWorst:  r[col["pre_fec_ber_worst"]].(float64),
					postWors:  r[col["post_fec_ber_worst"]].(float64),
					utilP95:   *r[col["utilisation_p95"]].(*float64),
					incidents: r[col["incidents"]].(uint64),
					byType:    r[col["incidents_by_type"]].(string),
				})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
}

// TestTrendsRefusesSpine: --by spine is refused with the reason, as is an
// unknown group or bucket.
func TestTrendsRefuses(t *testing.T) {
	q, err := chdb.QueryByName("trends")
	if err != nil {
		t.Fatal(err)
	}
	from := time.UnixMilli(t0).UTC()
	for _, tc := range []struct{ by, bucket, want string }{
		{"spine", "day", "every leaf uplinks to every spine"},
		{"pod", "day", `--by "pod": want leaf, rack, node or fabric`},
		{"leaf", "month", `--bucket "month"`},
	} {
		_, err := report.RunQuery(context.Background(), nil, q, report.Params{From: from, To: from.Add(time.Hour), By: tc.by, Bucket: tc.bucket})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--by %s --bucket %s: %v, want %q", tc.by, tc.bucket, err, tc.want)
		}
	}
}

// TestTrendsDaysFromDayRollup: day and week trends read the day rollup (and
// the hour rollup for a partial first or last day); they must answer as the
// query that read only the hour rollup did (testdata/trends_from_hours.sql,
// trends.sql before rollup_day), for every group and range, whole days or
// not: the same figures, but for the quantiles, which come from histogram
// bins (migration 0019) and must be the centre of the bin holding the exact
// quantile (sameBin). The query as it was before the bins
// (testdata/trends_exact_days.sql, the exact states the roll still writes)
// must still answer exactly.
func TestTrendsDaysFromDayRollup(t *testing.T) {
	t.Parallel()
	conn := trendsDB(t)
	// Three queries for each of 96 cases: minutes on a busy 2-core machine.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// More port-hours, so medians over days and weeks see many values and
	// ranges can cut days: the third day of gpu-001..003, hour by hour,
	// each hour a little different.
	day3 := time.UnixMilli(t0).UTC().Add(48 * time.Hour)
	var more []portHour
	for h := 0; h < 24; h++ {
		at := day3.Add(time.Duration(h) * time.Hour)
		more = append(more,
			portHour{hour: at, node: "gpu-001", pauseS: uint64(h % 3), discard: uint64(h % 2), corrected: uint64(1000 * (h + 1)), pcs: uint64(h % 4), util: 0.01 * float64(h+1)},
			portHour{hour: at, node: "gpu-002", pauseS: 1, discard: uint64(h % 5), corrected: uint64(7 * h), pcs: 0, util: 0.9 - 0.02*float64(h)},
			portHour{hour: at, node: "gpu-003", pauseS: uint64(h % 2), discard: 0, corrected: uint64(h * h), pcs: 1, util: 0.5},
		)
	}
	insertPortHours(ctx, t, conn, more...)
	if err := chdb.Roll(ctx, conn, chdb.Day, day3, day3.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	q, err := chdb.QueryByName("trends")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("testdata/trends_from_hours.sql")
	if err != nil {
		t.Fatal(err)
	}
	ref := q
	ref.SQL = stripComments(string(data))
	data, err = os.ReadFile("testdata/trends_exact_days.sql")
	if err != nil {
		t.Fatal(err)
	}
	exactDays := q
	exactDays.SQL = stripComments(string(data))
	from := time.UnixMilli(t0).UTC()
	ranges := []struct {
		name     string
		from, to time.Time
	}{
		{"whole days", from, from.Add(72 * time.Hour)},
		{"from mid-day", from.Add(90 * time.Minute), from.Add(72 * time.Hour)},
		{"to mid-day", from, from.Add(60*time.Hour + 30*time.Minute)},
		{"both mid-day", from.Add(time.Hour), from.Add(62 * time.Hour)},
		{"within one day", from.Add(50 * time.Hour), from.Add(58 * time.Hour)},
		{"a week around", from.Add(-72 * time.Hour), from.Add(96 * time.Hour)},
	}
	for _, r := range ranges {
		for _, by := range []string{"leaf", "rack", "node", "fabric"} {
			for _, bucket := range []string{"day", "week"} {
				for _, node := range []string{"", "gpu-001"} {
					p := report.Params{From: r.from, To: r.to, By: by, Bucket: bucket, Node: node}
					want, err := report.RunQuery(ctx, conn, ref, p)
					if err != nil {
						t.Fatalf("%s by %s per %s (hour rollup): %v", r.name, by, bucket, err)
					}
					got, err := report.RunQuery(ctx, conn, q, p)
					if err != nil {
						t.Fatalf("%s by %s per %s: %v", r.name, by, bucket, err)
					}
					if len(want.Rows) == 0 {
						t.Errorf("%s by %s per %s node %q: no rows to compare", r.name, by, bucket, node)
					}
					if msg := sameTrends(got, want); msg != "" {
						t.Errorf("%s by %s per %s node %q: from the day rollup %s\n%v\nfrom the hour rollup\n%v", r.name, by, bucket, node, msg, got.Rows, want.Rows)
					}
					old, err := report.RunQuery(ctx, conn, exactDays, p)
					if err != nil {
						t.Fatalf("%s by %s per %s (exact states): %v", r.name, by, bucket, err)
					}
					if !reflect.DeepEqual(old.Columns, want.Columns) || !reflect.DeepEqual(old.Rows, want.Rows) {
						t.Errorf("%s by %s per %s node %q: from the exact states\n%v\nfrom the hour rollup\n%v", r.name, by, bucket, node, old.Rows, want.Rows)
					}
				}
			}
		}
	}
}

// binned are the columns trends.sql takes from histogram bins for day and
// week buckets, and whether the bins are of BER (else utilisation).
var binned = map[string]bool{"pre_fec_ber_median": true, "post_fec_ber_median": true, "utilisation_p50": false, "utilisation_p95": false}

// sameTrends compares a trends result with the exact one of the same
// rows: every column equal but the binned quantiles, each the centre of
// the bin holding the exact value (sameBin). It returns what differs, or "".
func sameTrends(got, want *report.Result) string {
	if !reflect.DeepEqual(got.Columns, want.Columns) {
		return fmt.Sprintf("columns %v, want %v", got.Columns, want.Columns)
	}
	if len(got.Rows) != len(want.Rows) {
		return fmt.Sprintf("%d rows, want %d", len(got.Rows), len(want.Rows))
	}
	for i := range got.Rows {
		for j, c := range got.Columns {
			g, w := got.Rows[i][j], want.Rows[i][j]
			isBER, ok := binned[c]
			if !ok {
				if !reflect.DeepEqual(g, w) {
					return fmt.Sprintf("row %d %s: %v, want %v", i, c, g, w)
				}
				continue
			}
			gp, _ := g.(*float64)
			wf, _ := w.(float64)
			if gp == nil || !sameBin(*gp, wf, isBER) {
				return fmt.Sprintf("row %d %s: %v, not the bin of %v", i, c, deref(g), w)
			}
		}
	}
	return ""
}

// sameBin: got is the centre of the bin of want (migration 0019): for
// utilisation want*200 rounded, over 200 (want comes rounded to 4
// decimals, so half a bin and that rounding either side); for BER
// 10^(round(log10(want)*20)/20), 0 for 0.
func sameBin(got, want float64, isBER bool) bool {
	if !isBER {
		return math.Abs(got-want) <= 0.0025+0.00005 && math.Abs(got*200-math.Round(got*200)) < 1e-6
	}
	if want == 0 {
		return got == 0
	}
	centre := math.Pow(10, math.Round(math.Log10(want)*20)/20)
	return math.Abs(got-centre) <= 1e-9*centre
}

func deref(v any) any {
	if p, ok := v.(*float64); ok && p != nil {
		return *p
	}
	return v
}

// stripComments drops the comment lines of a query file, as
// chdb.QueryByName does.
func stripComments(sql string) string {
	var b strings.Builder
	for _, line := range strings.Split(sql, "\n") {
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return strings.TrimSpace(b.String())
}

// TestTrendsHistogramQuantiles: day and week buckets take utilisation
// p50/p95 and the BER medians from histograms (migration 0019); over a
// known spread of port-hours each must be within half a bin of the exact
// quantile (0.25 % of capacity; a factor of 10^0.025 for BER), the value
// quantileExact picks: 0-based rank floor(level * n) of the sorted values.
func TestTrendsHistogramQuantiles(t *testing.T) {
	t.Parallel()
	conn := chtest.Open(t, chtest.NewDatabase(t, chtest.DSN(t)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := chdb.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	// Three ports x 24 hours, off the bins' centres: utilisation skewed
	// towards the low end (a square), pre-FEC BER spread over nine decades,
	// post-FEC BER zero in a third of the hours.
	day := time.UnixMilli(t0).UTC().Add(5 * 24 * time.Hour)
	var hours []portHour
	var util, ber, post []float64
	for i := 0; i < 72; i++ {
		x := float64((i*37)%72) / 72
		h := portHour{
			hour:      day.Add(time.Duration(i%24) * time.Hour),
			node:      []string{"gpu-001", "gpu-002", "gpu-003"}[i/24],
			util:      0.0013 + 0.97*x*x,
			corrected: uint64(math.Round(math.Pow(10, 3+9*x))),
			pcs:       uint64((i * 7) % 3 * (i % 11)),
		}
		hours = append(hours, h)
		// As trends.sql computes them from the rollup_hour row.
		bytes := uint64(h.util * 100e9 / 8 * 3600)
		util = append(util, float64(bytes*8)/(100*3600000*1e6))
		ber = append(ber, float64(h.corrected)/1e12)
		post = append(post, float64(h.pcs)/1e12)
	}
	insertPortHours(ctx, t, conn, hours...)
	if err := chdb.Roll(ctx, conn, chdb.Day, day, day.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	exact := func(v []float64, level float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[int(level*float64(len(s)))]
	}
	q, err := chdb.QueryByName("trends")
	if err != nil {
		t.Fatal(err)
	}
	for _, bucket := range []string{"day", "week"} {
		// The whole day from the day rollup, and from the hour rollup as a
		// partial day (--from within the first hour: the hours from its
		// start).
		for _, r := range []struct{ from, to time.Time }{
			{day, day.Add(24 * time.Hour)},
			{day.Add(30 * time.Minute), day.Add(24 * time.Hour)},
		} {
			res, err := report.RunQuery(ctx, conn, q, report.Params{From: r.from, To: r.to, By: "fabric", Bucket: bucket})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Rows) != 1 {
				t.Fatalf("per %s from %s: %d rows, want 1", bucket, r.from, len(res.Rows))
			}
			row := res.Rows[0]
			got := func(col string) float64 {
				t.Helper()
				v, ok := row[res.Column(col)].(*float64)
				if !ok || v == nil {
					t.Fatalf("per %s: %s is %#v, want a number", bucket, col, row[res.Column(col)])
				}
				return *v
			}
			for _, c := range []struct {
				col   string
				want  float64
				isBER bool
			}{
				{"utilisation_p50", exact(util, 0.5), false},
				{"utilisation_p95", exact(util, 0.95), false},
				{"pre_fec_ber_median", exact(ber, 0.5), true},
				{"post_fec_ber_median", exact(post, 0.5), true},
			} {
				g := got(c.col)
				within := math.Abs(g-c.want) <= 0.0025
				if c.isBER {
					within = g == c.want || (g > 0 && c.want > 0 && math.Abs(math.Log10(g)-math.Log10(c.want)) <= 0.025+1e-12)
				}
				if !within || !sameBin(g, c.want, c.isBER) {
					t.Errorf("per %s from %s: %s %g, exact %g: not the centre of its bin", bucket, r.from.Format(time.RFC3339), c.col, g, c.want)
				}
			}
		}
	}
}
