package schemas

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestCheckBatchSubject(t *testing.T) {
	b := &CounterBatch{Node: "gpu-017.pod-a"}
	tests := []struct {
		subject string
		want    string // "" = accepted
	}{
		{CountersSubject("gpu-017.pod-a"), ""},
		{"rdmawatch.counters.7.gpu-017%2Epod-a", ""},
		{"rdmawatch.counters.gpu-victim", `batch of node "gpu-017.pod-a" (token "gpu-017%2Epod-a") on subject "rdmawatch.counters.gpu-victim" (token "gpu-victim")`},
		{"rdmawatch.counters.3.gpu-victim", `(token "gpu-victim")`},
		{"rdmawatch.counters.x.gpu-017%2Epod-a", "want rdmawatch.counters.<node> or rdmawatch.counters.<partition>.<node>"},
		{"rdmawatch.counters.1.2.gpu-017%2Epod-a", "want rdmawatch.counters"},
		{"rdmawatch.inventory.gpu-017%2Epod-a", "want rdmawatch.counters"},
		{"rdmawatch.counters.", "want rdmawatch.counters"},
		{"", "want rdmawatch.counters"},
	}
	for _, tc := range tests {
		t.Run(tc.subject, func(t *testing.T) {
			err := CheckBatchSubject(tc.subject, b)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if !errors.Is(err, ErrSubjectMismatch) {
				t.Errorf("%v is not ErrSubjectMismatch", err)
			}
		})
	}
	inv := &Inventory{Node: "gpu-a"}
	if err := CheckInventorySubject(InventorySubject("gpu-a"), inv); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{InventorySubject("gpu-b"), "rdmawatch.inventory.1.gpu-a", CountersSubject("gpu-a")} {
		if err := CheckInventorySubject(s, inv); !errors.Is(err, ErrSubjectMismatch) {
			t.Errorf("inventory on %q: %v", s, err)
		}
	}
}

func TestEventSubject(t *testing.T) {
	e := sampleEvent()
	if got, want := EventSubject(e), "rdmawatch.events.link_network.pfc_storm.critical.resolved.port.host-a"; got != want {
		t.Errorf("EventSubject = %q, want %q", got, want)
	}
	e.Scope, e.Subject = ScopeFabric, Subject{}
	if got, want := EventSubject(e), "rdmawatch.events.link_network.pfc_storm.critical.resolved.fabric._"; got != want {
		t.Errorf("fabric EventSubject = %q, want %q", got, want)
	}
	e.Subject.Node = "gpu.1"
	if got := EventSubject(e); !strings.HasSuffix(got, ".gpu%2E1") || strings.Count(got, ".") != 7 {
		t.Errorf("node with a dot: %q", got)
	}
	filters := []struct {
		f    EventFilter
		want string
	}{
		{EventFilter{}, "rdmawatch.events.*.*.*.*.*.*"},
		{EventFilter{Type: TypePFCStorm}, "rdmawatch.events.*.pfc_storm.*.*.*.*"},
		{EventFilter{Severity: SeverityCritical, Node: "gpu-017.pod-a"}, "rdmawatch.events.*.*.critical.*.*.gpu-017%2Epod-a"},
		{EventFilter{Layer: LayerPhysical, Type: TypeBERDrift, Severity: SeverityWarning, State: StateOpen, Scope: ScopePort, Node: "n"},
			"rdmawatch.events.physical.ber_drift.warning.open.port.n"},
	}
	for _, tc := range filters {
		if got := EventsFilter(tc.f); got != tc.want {
			t.Errorf("EventsFilter(%+v) = %q, want %q", tc.f, got, tc.want)
		}
	}
	// A filter matches the subject of the events it describes, and only
	// those.
	e = sampleEvent()
	for _, tc := range []struct {
		f     EventFilter
		match bool
	}{
		{EventFilter{Type: TypePFCStorm, Node: "host-a"}, true},
		{EventFilter{Severity: SeverityCritical}, true},
		{EventFilter{Severity: SeverityWarning}, false},
		{EventFilter{Node: "host-b"}, false},
	} {
		if got := subjectMatches(EventsFilter(tc.f), EventSubject(e)); got != tc.match {
			t.Errorf("filter %+v on %s: %v", tc.f, EventSubject(e), got)
		}
	}
	if !subjectMatches(EventsAllFilter, EventSubject(e)) {
		t.Errorf("the stream's subject %s does not take %s", EventsAllFilter, EventSubject(e))
	}
}

// subjectMatches is NATS's rule for a filter with '*' and a trailing '>'.
func subjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || (tok != "*" && tok != s[i]) {
			return false
		}
	}
	return len(f) == len(s)
}

func TestSubjectToken(t *testing.T) {
	tests := map[string]string{
		"gpu-017":       "gpu-017",
		"gpu-017.pod-a": "gpu-017%2Epod-a",
		"a b*>":         "a%20b%2A%3E",
		"50%":           "50%25",
		"":              "_",
		"_":             "%5F",
		"a_b":           "a_b",
		"gpu-\xff":      "gpu-%FF",
		"gpu-\xfe":      "gpu-%FE",
		"gpu-\uFFFD":    "gpu-\uFFFD",
		"gpu-\u00a0x":   "gpu-%C2%A0x", // no-break space
		"gpu-\tx\x7f":   "gpu-%09x%7F",
		"gpu-ü":         "gpu-ü",
	}
	for in, want := range tests {
		if got := SubjectToken(in); got != want {
			t.Errorf("SubjectToken(%q) = %q, want %q", in, got, want)
		}
	}
	if CountersSubject("a.b") != "rdmawatch.counters.a%2Eb" {
		t.Errorf("CountersSubject: %s", CountersSubject("a.b"))
	}
}

// unescapeToken inverts SubjectToken: it proves the mapping injective.
func unescapeToken(tok string) (string, bool) {
	switch tok {
	case "_":
		return "", true
	case "%5F":
		return "_", true
	}
	var b []byte
	for i := 0; i < len(tok); i++ {
		if tok[i] != '%' {
			b = append(b, tok[i])
			continue
		}
		if i+2 >= len(tok) {
			return "", false
		}
		hi, lo := strings.IndexByte(upperHex, tok[i+1]), strings.IndexByte(upperHex, tok[i+2])
		if hi < 0 || lo < 0 {
			return "", false
		}
		b = append(b, byte(hi<<4|lo))
		i += 2
	}
	return string(b), true
}

// checkToken is the property FuzzSubjectToken holds every input to.
func checkToken(t *testing.T, in string) {
	tok := SubjectToken(in)
	if tok == "" || !utf8.ValidString(tok) {
		t.Fatalf("SubjectToken(%q) = %q: empty or not UTF-8", in, tok)
	}
	for _, r := range tok {
		if r == '.' || r == '*' || r == '>' || unicode.IsSpace(r) || unicode.IsControl(r) {
			t.Fatalf("SubjectToken(%q) = %q holds %q", in, tok, r)
		}
	}
	back, ok := unescapeToken(tok)
	if !ok || back != in {
		t.Fatalf("SubjectToken(%q) = %q reads back as %q %v: two inputs could share it", in, tok, back, ok)
	}
}

// go test -run '^$' -fuzz '^FuzzSubjectToken$' -fuzztime 60s ./schemas
func FuzzSubjectToken(f *testing.F) {
	for _, s := range []string{"", "_", "gpu-017.pod-a", "gpu-\xff", "gpu-\xfe", "gpu-\uFFFD", "50%", "%25", "a b\t*>", "\u2028", "ü\x80"} {
		f.Add(s)
	}
	f.Fuzz(checkToken)
}
