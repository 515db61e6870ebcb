package report

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

func TestResultWrite(t *testing.T) {
	ts := time.Date(2026, 3, 14, 0, 3, 0, 0, time.UTC)
	r := &Result{Columns: []string{"ts", "node", "ber", "ports"}, Rows: [][]any{{ts, "gpu-1", 1.5e-9, []string{"a", "b"}}, {ts, "gpu,2", math.NaN(), []string{}}}}
	for _, tc := range []struct{ format, want string }{
		{"json", `{"ber":1.5e-9,"node":"gpu-1","ports":["a","b"],"ts":"2026-03-14T00:03:00Z"}` + "\n" + `{"ber":null,"node":"gpu,2","ports":[],"ts":"2026-03-14T00:03:00Z"}` + "\n"},
		{"csv", "ts,node,ber,ports\n2026-03-14T00:03:00Z,gpu-1,1.5e-09,[a b]\n2026-03-14T00:03:00Z,\"gpu,2\",NaN,[]\n"},
		{"table", "ts                    node   ber       ports\n2026-03-14T00:03:00Z  gpu-1  1.50e-09  [a b]\n2026-03-14T00:03:00Z  gpu,2  NaN       []\n(2 rows)\n"},
	} {
		var b bytes.Buffer
		if err := r.Write(&b, tc.format); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("%s:\n%s\nwant\n%s", tc.format, b.String(), tc.want)
		}
	}
	if err := r.Write(&bytes.Buffer{}, "xml"); err == nil {
		t.Error("format xml: no error")
	}
}

func TestTableHumanUnitsAndCuts(t *testing.T) {
	long := strings.Repeat("x", 100)
	r := &Result{
		Columns: []string{"rcv_bytes", "rcv_gbps", "utilisation_p95", "tx_pause_fraction", "summary", "evidence", "next_checks", "ports"},
		Rows:    [][]any{{uint64(3) << 40, 42.345, 0.635, 0.5, long, `{"a":1}`, []string{"ibstat"}, uint64(8)}},
	}
	var b bytes.Buffer
	if err := r.Write(&b, "table"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"3.0 TiB", "42.3 Gb/s", "63.5 %", "50.0 %", strings.Repeat("x", DefaultMaxCell-1) + "…", " 8\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, absent := range []string{"evidence", "next_checks", "ibstat", strings.Repeat("x", DefaultMaxCell+1)} {
		if strings.Contains(out, absent) {
			t.Errorf("table shows %q:\n%s", absent, out)
		}
	}
	b.Reset()
	if err := r.Write(&b, "json"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"evidence":{"a":1}`, `"next_checks":["ibstat"]`, `"summary":"` + long + `"`, `"rcv_bytes":3298534883328`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("json lacks %s:\n%s", want, b.String())
		}
	}
}

func TestBytesIEC(t *testing.T) {
	for in, want := range map[float64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1.5 * 1024 * 1024: "1.5 MiB", 1 << 50: "1.0 PiB"} {
		if got := bytesIEC(in); got != want {
			t.Errorf("bytesIEC(%g) = %q, want %q", in, got, want)
		}
	}
}
