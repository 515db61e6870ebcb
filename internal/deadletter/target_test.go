package deadletter

import (
	"strings"
	"testing"

	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestTarget(t *testing.T) {
	for _, tc := range []struct {
		name, stream, subject string
		want                  string // the target; empty: refused
		err                   string
	}{
		{"counters, as stored", schemas.StreamCounters, "rdmawatch.counters.7.gpu-001", "rdmawatch.counters.gpu-001", ""},
		{"counters, as published", schemas.StreamCounters, "rdmawatch.counters.gpu-001", "rdmawatch.counters.gpu-001", ""},
		{"counters, escaped node", schemas.StreamCounters, "rdmawatch.counters.12.gpu%2E001", "rdmawatch.counters.gpu%2E001", ""},
		{"counters, a node named like a number", schemas.StreamCounters, "rdmawatch.counters.3.42", "rdmawatch.counters.42", ""},
		{"counters, too many tokens", schemas.StreamCounters, "rdmawatch.counters.a.b.c", "", "is not one of stream RDMAWATCH_COUNTERS's subjects"},
		{"counters, partition not a number", schemas.StreamCounters, "rdmawatch.counters.x.gpu-001", "", "subjects"},
		{"counters, partition only", schemas.StreamCounters, "rdmawatch.counters.7.", "", "empty token"},
		{"event", schemas.StreamEvents, "rdmawatch.events.link_network.pfc_storm.critical.open.node.gpu-001", "rdmawatch.events.link_network.pfc_storm.critical.open.node.gpu-001", ""},
		{"inventory", schemas.StreamInventory, "rdmawatch.inventory.gpu-001", "rdmawatch.inventory.gpu-001", ""},
		{"inventory, one token too many", schemas.StreamInventory, "rdmawatch.inventory.1.gpu-001", "", "subjects"},
		{"inventory of a counters subject", schemas.StreamInventory, "rdmawatch.counters.gpu-001", "", "subjects"},
		{"events prefix alone", schemas.StreamEvents, "rdmawatch.events", "", "subjects"},
		{"dead-letter stream", schemas.StreamDeadLetter, "rdmawatch.deadletter.sink.RDMAWATCH_COUNTERS", "", "not one of rdmawatch's streams"},
		{"unknown stream", "ORDERS", "orders.new", "", `stream "ORDERS" is not one of rdmawatch's streams`},
		{"no stream", "", "rdmawatch.counters.gpu-001", "", "not one of rdmawatch's streams"},
		{"no subject", schemas.StreamCounters, "", "", "no original subject"},
		{"wildcard", schemas.StreamEvents, "rdmawatch.events.*.x", "", "not one literal subject"},
		{"full wildcard", schemas.StreamEvents, "rdmawatch.events.>", "", "not one literal subject"},
		{"space", schemas.StreamInventory, "rdmawatch.inventory.gpu 1", "", "not one literal subject"},
		{"line break", schemas.StreamInventory, "rdmawatch.inventory.gpu\n1", "", "not one literal subject"},
		{"empty token", schemas.StreamEvents, "rdmawatch.events..x", "", "empty token"},
		{"API subject", schemas.StreamCounters, "$JS.API.STREAM.PURGE.RDMAWATCH_COUNTERS", "", "subjects"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Target(tc.stream, tc.subject)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Target(%q, %q) = %q, %v; want an error with %q", tc.stream, tc.subject, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Target(%q, %q) = %q, %v; want %q", tc.stream, tc.subject, got, err, tc.want)
			}
		})
	}
}

func TestSubjectMatches(t *testing.T) {
	for _, tc := range []struct {
		filter, subject string
		want            bool
	}{
		{"a.*", "a.b", true},
		{"a.*", "a.b.c", false},
		{"a.*", "a", false},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"*.b", "x.b", true},
	} {
		if got := subjectMatches(tc.filter, tc.subject); got != tc.want {
			t.Errorf("subjectMatches(%q, %q) = %v", tc.filter, tc.subject, got)
		}
	}
}

// FuzzTarget: whatever a letter's headers say, a redrive goes to one
// literal subject of the data stream they name, never elsewhere.
func FuzzTarget(f *testing.F) {
	for _, s := range []string{"rdmawatch.counters.7.gpu-001", "rdmawatch.counters.gpu-001", "rdmawatch.events.a.b.c.d.e.f",
		"rdmawatch.inventory.n", "rdmawatch.counters.1.2.3", "rdmawatch.counters..x", "rdmawatch.deadletter.sink.X", "$JS.API.>", ""} {
		f.Add(schemas.StreamCounters, s)
		f.Add(schemas.StreamEvents, s)
		f.Add(schemas.StreamInventory, s)
	}
	f.Add(schemas.StreamDeadLetter, "rdmawatch.deadletter.sink.X")
	f.Fuzz(func(t *testing.T, stream, subject string) {
		got, err := Target(stream, subject)
		if err != nil {
			return
		}
		if checkLiteral(got) != nil {
			t.Fatalf("Target(%q, %q) = %q: not a literal subject", stream, subject, got)
		}
		ok := false
		for _, c := range DataStreams() {
			if c.Name != stream {
				continue
			}
			for _, f := range c.Subjects {
				ok = ok || subjectMatches(f, got)
			}
		}
		if !ok || strings.HasPrefix(got, deadPrefix) {
			t.Fatalf("Target(%q, %q) = %q: outside the stream's subjects", stream, subject, got)
		}
		// The counters transform only ever drops a partition token.
		if got != subject && !(stream == schemas.StreamCounters && strings.HasSuffix(subject, "."+strings.TrimPrefix(got, "rdmawatch.counters."))) {
			t.Fatalf("Target(%q, %q) = %q: not the subject it was stored under", stream, subject, got)
		}
	})
}

func TestParseDeadSubject(t *testing.T) {
	for _, tc := range []struct {
		in           string
		role, stream string
		ok           bool
	}{
		{schemas.DeadLetterSubject("sink", schemas.StreamCounters), "sink", schemas.StreamCounters, true},
		{"rdmawatch.deadletter.sink", "", "", false},
		{"rdmawatch.deadletter.sink.A.B", "", "", false},
		{"rdmawatch.deadletter..A", "", "", false},
		{"rdmawatch.events.x.y", "", "", false},
	} {
		role, stream, ok := parseDeadSubject(tc.in)
		if role != tc.role || stream != tc.stream || ok != tc.ok {
			t.Errorf("parseDeadSubject(%q) = %q, %q, %v", tc.in, role, stream, ok)
		}
	}
}
