package processor_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/rdmawatch/rdmawatch/processor"
	_ "github.com/rdmawatch/rdmawatch/processor/detect/all" // every detector registers itself
	"github.com/rdmawatch/rdmawatch/processor/detect/countersaturated"
	"github.com/rdmawatch/rdmawatch/processor/detect/linkflap"
	"github.com/rdmawatch/rdmawatch/processor/internal/detecttest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

func TestRegistry(t *testing.T) {
	got := processor.Registered()
	for _, want := range []string{schemas.TypeCounterSaturated, schemas.TypeLinkFlap} {
		found := false
		for _, n := range got {
			found = found || n == want
		}
		if !found {
			t.Errorf("%s not registered: %v", want, got)
		}
	}
	dets, err := processor.NewDetectors()
	if err != nil || len(dets) != len(got) {
		t.Fatalf("NewDetectors: %v %v", dets, err)
	}
	if _, err := processor.NewDetectors("nope"); err == nil {
		t.Fatal("unknown detector accepted")
	}
	a, _ := processor.NewDetectors(schemas.TypeLinkFlap)
	b, _ := processor.NewDetectors(schemas.TypeLinkFlap)
	if a[0] == b[0] {
		t.Fatal("processors must not share detector instances")
	}
}

// TestPortMemory keeps an eye on the per-port budget (8 KiB with every
// detector for a 2-hour window): a tracked healthy port must stay far below.
func TestPortMemory(t *testing.T) {
	h := detecttest.NewHarness(t, linkflap.New(), countersaturated.New())
	id := detecttest.PortA
	h.Feed(detecttest.Sample(id, 0, "ACTIVE", detecttest.Ctr("symbol_error", 65535, 0, detecttest.First|detecttest.Sat), detecttest.Ctr("link_downed", 0, 0, detecttest.First)))
	h.Feed(detecttest.Sample(id, 5, "ACTIVE", detecttest.Ctr("symbol_error", 65535, 0, detecttest.Sat), detecttest.Ctr("link_downed", 1, 1, 0)))
	p := h.PortStates[id]
	if processor.PortLocals(p) != 2 {
		t.Fatalf("locals %d", processor.PortLocals(p))
	}
}

// TestPortMemoryBudget measures the heap per tracked port with both
// detectors, a sample every 5 s for 2 hours, one port in ten with an
// incident open: the target is 8 KiB per port.
func TestPortMemoryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap")
	}
	const ports = 500
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h := detecttest.NewHarness(t, linkflap.New(), countersaturated.New())
	for sec := 0.0; sec < 7200; sec += 5 {
		for i := 0; i < ports; i++ {
			id := schemas.PortID{Node: fmt.Sprintf("gpu-%04d", i), Device: "mlx5_0", Port: 1}
			flags, sym := schemas.Flag(0), uint64(10)
			if sec == 0 {
				flags = detecttest.First
			}
			if i%10 == 0 {
				sym, flags = 65535, flags|detecttest.Sat
			}
			h.Feed(detecttest.Sample(id, sec, "ACTIVE", detecttest.Ctr("symbol_error", sym, 0, flags), detecttest.Ctr("link_downed", 0, 0, flags&detecttest.First)))
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perPort := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / ports
	t.Logf("%d B per port (%d events)", perPort, len(h.Events))
	if perPort > 8<<10 {
		t.Errorf("%d B per port, budget 8 KiB", perPort)
	}
	runtime.KeepAlive(h)
}
