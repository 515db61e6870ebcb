package report

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/sink"
)

// TestPortSeriesGlobalPauseAndLineRateBER: the series a storm's and a BER
// drift's plots draw, from port_samples as the sink writes them. A storm
// origin on IEEE 802.3x global pause shows its pauses (no per-priority
// counter at all); an Ethernet port without rx_bits_phy shows a pre-FEC BER
// over the line rate, and the legend says so; a pinned 32-bit
// port_rcv_data is a gap in the throughput, not 0 Gb/s.
func TestPortSeriesGlobalPauseAndLineRateBER(t *testing.T) {
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	conn := chtest.Open(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := chdb.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	const t0 = int64(1767225600000)
	eth := func(name string, delta uint64, flags schemas.Flag) schemas.CounterDelta {
		return schemas.CounterDelta{Source: schemas.SourceEthtool, Name: name, Value: delta, Delta: delta, Flags: flags}
	}
	ib := func(name string, value, delta uint64, flags schemas.Flag) schemas.CounterDelta {
		return schemas.CounterDelta{Source: schemas.SourceCounters, Name: name, Value: value, Delta: delta, Flags: flags}
	}
	b := &schemas.CounterBatch{Node: "gpu-017", BootID: "b", TimeMs: t0}
	for k := int64(1); k <= 3; k++ {
		rcv := ib("port_rcv_data", 1<<32-1, 0, schemas.FlagSaturated)
		if k == 1 {
			rcv = ib("port_rcv_data", 4_000_000_000, 1_250_000_000, 0)
		}
		b.Ports = append(b.Ports, schemas.PortSample{Device: "mlx5_0", Port: 1, Netdev: "eth2", LinkLayer: "Ethernet",
			State: "ACTIVE", Rate: "100 Gb/sec (4X EDR)", TimeMs: t0 + k*1000, IntervalMs: 1000, Counters: []schemas.CounterDelta{
				eth("tx_global_pause_duration", 900_000, 0), eth("rx_global_pause_duration", 0, 0), eth("tx_global_pause", 11_000, 0),
				eth("rx_corrected_bits_phy", 1000, 0), rcv,
			}})
	}
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO port_samples ("+strings.Join(sink.SampleColumns, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sink.SampleRows(b) {
		if err := batch.Append(r.Values()...); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	s, err := portSeries(ctx, conn, "gpu-017", "mlx5_0", 1, t0, t0+10_000)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.times) != 3 {
		t.Fatalf("%d samples", len(s.times))
	}
	for i := range s.times {
		if s.txPause[i] != 0.9 || s.ber[i] != 1e-8 {
			t.Errorf("sample %d: tx pause %v (want 0.9 from the global pause), pre-FEC BER %v (want 1e-8 over the line rate)", i, s.txPause[i], s.ber[i])
		}
	}
	if s.rcv[0] != 10 || !math.IsNaN(s.rcv[1]) || !math.IsNaN(s.rcv[2]) {
		t.Errorf("receive Gb/s %v: want 10, then gaps while port_rcv_data is pinned", s.rcv)
	}
	if s.countedBits {
		t.Error("no rx_bits_phy was listed, yet the series says it was counted")
	}
	inc := &Incident{Type: "ber_drift", Node: "gpu-017", Device: "mlx5_0", Port: 1, StartMs: t0, LastMs: t0 + 3000, Evidence: "{}"}
	p, err := portPlot(ctx, conn, inc)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Panels[0].Series[0].Name; got != "pre-FEC BER (over link rate x time)" {
		t.Errorf("BER legend %q", got)
	}
	inc.Type = "pfc_storm"
	if p, err = portPlot(ctx, conn, inc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Panels[0].Title, "global pause") || p.Panels[0].Series[0].Values[0] != 0.9 {
		t.Errorf("storm panel %q %v", p.Panels[0].Title, p.Panels[0].Series[0].Values)
	}
}
