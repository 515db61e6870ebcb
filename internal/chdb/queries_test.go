package chdb

import "testing"

func TestShippedQueriesParse(t *testing.T) {
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ber_trend", "causes", "cnp_balance", "config_history", "events", "leaf_capacity", "port_timeline", "saturation_flaps", "storm_spread", "trends"}
	if len(qs) != len(want) {
		t.Fatalf("%d queries, want %v", len(qs), want)
	}
	for i, q := range qs {
		if q.Name != want[i] || q.Question == "" || q.SQL == "" {
			t.Errorf("query %d: %+v", i, q)
		}
	}
	if _, err := QueryByName("nope"); err == nil {
		t.Error("QueryByName(nope): no error")
	}
}

func TestParseQueryRejects(t *testing.T) {
	for name, text := range map[string]string{
		"no question":    "SELECT 1",
		"no statement":   "-- question: what?\n",
		"two statements": "-- question: what?\nSELECT 1;\nSELECT 2",
	} {
		if _, err := parseQuery("x", text); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
