package report_test

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/report"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sink"
)

// t0 is 2026-01-01T00:00:00Z in milliseconds.
const t0 = 1767225600000

func causeEvent(typ, id string, subj schemas.Subject, startS int64, rev int, cause *schemas.Event) *schemas.Event {
	e := &schemas.Event{
		Version: schemas.Version, ID: id, Type: typ, State: schemas.StateOpen, Severity: schemas.SeverityCritical,
		Scope: schemas.ScopePort, Subject: subj, Start: schemas.Millis(t0 + startS*1000),
		DetectedAt: schemas.Millis(t0 + (startS+10)*1000), Layer: schemas.LayerLinkNetwork,
		Summary: typ + " on " + subj.String(), Revision: rev,
	}
	if cause != nil {
		e.Cause = &schemas.Cause{ID: cause.ID, Type: cause.Type, Subject: cause.Subject}
	}
	return e
}

// causeChainDB writes a chain into a fresh database: a receive_starvation
// on gpu-017 explains a pfc_storm from that port, which explains
// retransmissions on gpu-020; a ber_drift on gpu-030 explains
// retransmissions there; a link_flap on gpu-040 explains nothing. The
// storm's first revision named no cause yet: the latest one counts.
func causeChainDB(t *testing.T) (driver.Conn, map[string]*schemas.Event) {
	t.Helper()
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	conn := chtest.Open(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := chdb.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	g17 := schemas.Subject{Node: "gpu-017", Device: "mlx5_0", Port: 1}
	starve := causeEvent(schemas.TypeReceiveStarvation, "receive_starvation/gpu-017/mlx5_0/1/1767225600", g17, 0, 1, nil)
	stormEarly := causeEvent(schemas.TypePFCStorm, "pfc_storm/gpu-017/mlx5_0/1/1767225690", g17, 90, 1, nil)
	storm := causeEvent(schemas.TypePFCStorm, "pfc_storm/gpu-017/mlx5_0/1/1767225690", g17, 90, 2, starve)
	retx := causeEvent(schemas.TypeRetransmissions, "retransmissions/gpu-020/mlx5_0/1/1767225700",
		schemas.Subject{Node: "gpu-020", Device: "mlx5_0", Port: 1}, 100, 1, storm)
	g30 := schemas.Subject{Node: "gpu-030", Device: "mlx5_1", Port: 1}
	ber := causeEvent(schemas.TypeBERDrift, "ber_drift/gpu-030/mlx5_1/1/1767225650", g30, 50, 1, nil)
	retx30 := causeEvent(schemas.TypeRetransmissions, "retransmissions/gpu-030/mlx5_1/1/1767225720", g30, 120, 1, ber)
	flap := causeEvent(schemas.TypeLinkFlap, "link_flap/gpu-040/mlx5_0/1/1767225610",
		schemas.Subject{Node: "gpu-040", Device: "mlx5_0", Port: 1}, 10, 1, nil)
	insertEvents(ctx, t, conn, starve, stormEarly, storm, retx, ber, retx30, flap)
	return conn, map[string]*schemas.Event{"starve": starve, "storm": storm, "retx": retx, "ber": ber, "retx30": retx30, "flap": flap}
}

func TestCausesQuery(t *testing.T) {
	t.Parallel()
	c, evs := causeChainDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	day := report.Params{From: time.UnixMilli(t0).Add(-time.Hour), To: time.UnixMilli(t0).Add(time.Hour)}
	type row struct {
		id, typ, subject string
		effects          []string
		effectTypes      []string
	}
	for _, tc := range []struct {
		name string
		p    func(report.Params) report.Params
		want []row
	}{
		{"every root", func(p report.Params) report.Params { return p }, []row{
			// The storm explains retransmissions but has a cause: no root.
			{evs["starve"].ID, schemas.TypeReceiveStarvation, "gpu-017/mlx5_0/1", []string{evs["storm"].ID}, []string{schemas.TypePFCStorm}},
			{evs["ber"].ID, schemas.TypeBERDrift, "gpu-030/mlx5_1/1", []string{evs["retx30"].ID}, []string{schemas.TypeRetransmissions}},
		}},
		{"node of an effect", func(p report.Params) report.Params { p.Node = "gpu-030"; return p }, []row{
			{evs["ber"].ID, schemas.TypeBERDrift, "gpu-030/mlx5_1/1", []string{evs["retx30"].ID}, []string{schemas.TypeRetransmissions}},
		}},
		{"type filter", func(p report.Params) report.Params { p.Type = schemas.TypeReceiveStarvation + ",link_flap"; return p }, []row{
			{evs["starve"].ID, schemas.TypeReceiveStarvation, "gpu-017/mlx5_0/1", []string{evs["storm"].ID}, []string{schemas.TypePFCStorm}},
		}},
		{"range before the roots", func(p report.Params) report.Params {
			p.From, p.To = time.UnixMilli(t0).Add(-2*time.Hour), time.UnixMilli(t0).Add(-time.Hour)
			return p
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := report.Run(ctx, c, "causes", tc.p(day))
			if err != nil {
				t.Fatal(err)
			}
			var got []row
			for _, r := range res.Rows {
				got = append(got, row{
					id: r[res.Column("id")].(string), typ: r[res.Column("type")].(string), subject: r[res.Column("subject")].(string),
					effects: r[res.Column("effect_ids")].([]string), effectTypes: r[res.Column("effect_types")].([]string),
				})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rows\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestPostmortemShowsCauseChains(t *testing.T) {
	t.Parallel()
	c, evs := causeChainDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := report.Params{From: time.UnixMilli(t0).Add(-time.Hour), To: time.UnixMilli(t0).Add(time.Hour)}
	path, incs, err := report.Postmortem(ctx, c, p, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(incs) != 6 {
		t.Fatalf("%d incidents, want 6", len(incs))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	md := string(data)
	// Onset order: starvation 1, link_flap 2, ber_drift 3, storm 4, retx 5, retx30 6.
	for _, want := range []string{
		"## Cause chains\n\n" +
			"- 1. receive_starvation on gpu-017/mlx5_0/1 (2026-01-01 00:00:00Z)\n" +
			"  - → 4. pfc_storm on gpu-017/mlx5_0/1 (2026-01-01 00:01:30Z)\n" +
			"    - → 5. retransmissions on gpu-020/mlx5_0/1 (2026-01-01 00:01:40Z)\n" +
			"- 3. ber_drift on gpu-030/mlx5_1/1 (2026-01-01 00:00:50Z)\n" +
			"  - → 6. retransmissions on gpu-030/mlx5_1/1 (2026-01-01 00:02:00Z)\n\n## Timeline",
		"- caused by receive_starvation on gpu-017/mlx5_0/1 (incident 1)\n",
		"- caused by pfc_storm on gpu-017/mlx5_0/1 (incident 4)\n",
		"- caused by ber_drift on gpu-030/mlx5_1/1 (incident 3)\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Count(md, "caused by") != 3 {
		t.Errorf("%d 'caused by' lines, want 3:\n%s", strings.Count(md, "caused by"), md)
	}

	// With the root outside the node filter, the chain names it by id.
	p.Node = "gpu-020"
	path, _, err = report.Postmortem(ctx, c, p, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(path)
	if want := "- pfc_storm on gpu-017/mlx5_0/1 (id `" + evs["storm"].ID + "`, not in this report)\n  - → 1. retransmissions"; !strings.Contains(string(data), want) {
		t.Errorf("filtered report lacks %q:\n%s", want, data)
	}
}

// insertEvents writes events into the events table as the sink does.
func insertEvents(ctx context.Context, t *testing.T, conn driver.Conn, events ...*schemas.Event) {
	t.Helper()
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO events ("+strings.Join(sink.EventColumns, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		r, err := sink.NewEventRow(e)
		if err != nil {
			t.Fatal(err)
		}
		if err := batch.Append(r.Values()...); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
}
