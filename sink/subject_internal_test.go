package sink

import (
	"strings"
	"testing"

	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestCheckSubjectNode(t *testing.T) {
	for _, c := range []struct {
		subject, node string
		ok            bool
	}{
		{"rdmawatch.counters.3.gpu-a", "gpu-a", true},
		{"rdmawatch.counters.3.gpu-a", "gpu-victim", false},
		{"rdmawatch.inventory.gpu-017%2Epod-a", "gpu-017.pod-a", true},
		{"rdmawatch.inventory.gpu-017", "gpu-017.pod-a", false},
		{"rdmawatch.counters.0._", "", true},
		{"rdmawatch.counters.0.gpu-a", "", false},
	} {
		err := checkSubjectNode(c.subject, c.node)
		if (err == nil) != c.ok {
			t.Errorf("checkSubjectNode(%q, %q) = %v, want ok %v", c.subject, c.node, err, c.ok)
		}
	}
}

// The node a subject was built from always passes, and any other node whose
// token differs never does.
func FuzzCheckSubjectNode(f *testing.F) {
	f.Add("gpu-a", "gpu-victim")
	f.Add("gpu-017.pod-a", "gpu-017%2Epod-a")
	f.Add("", "_")
	f.Add("a b*c>d", "a%20b")
	f.Fuzz(func(t *testing.T, node, other string) {
		for _, subject := range []string{
			strings.Replace(schemas.CountersSubject(node), "rdmawatch.counters.", "rdmawatch.counters.7.", 1),
			schemas.InventorySubject(node),
		} {
			if err := checkSubjectNode(subject, node); err != nil {
				t.Fatalf("own node refused: %v", err)
			}
			if schemas.SubjectToken(other) != schemas.SubjectToken(node) && checkSubjectNode(subject, other) == nil {
				t.Fatalf("node %q accepted on %q", other, subject)
			}
		}
	})
}
