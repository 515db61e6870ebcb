package report

import (
	"bytes"
	"math"
	"testing"
	"time"
)

func TestResultWrite(t *testing.T) {
	ts := time.Date(2026, 3, 14, 0, 3, 0, 0, time.UTC)
	r := &Result{Columns: []string{"ts", "node", "ber", "ports"}, Rows: [][]any{{ts, "gpu-1", 1.5e-9, []string{"a", "b"}}, {ts, "gpu,2", math.NaN(), []string{}}}}
	for _, tc := range []struct{ format, want string }{
		{"json", `{"ber":1.5e-9,"node":"gpu-1","ports":["a","b"],"ts":"2026-03-14T00:03:00Z"}` + "\n" + `{"ber":null,"node":"gpu,2","ports":[],"ts":"2026-03-14T00:03:00Z"}` + "\n"},
		{"csv", "ts,node,ber,ports\n2026-03-14T00:03:00Z,gpu-1,1.5e-09,[a b]\n2026-03-14T00:03:00Z,\"gpu,2\",NaN,[]\n"},
		{"table", "ts                    node   ber      ports\n2026-03-14T00:03:00Z  gpu-1  1.5e-09  [a b]\n2026-03-14T00:03:00Z  gpu,2  NaN      []\n(2 rows)\n"},
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
