package engine

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestElasticTakeoverTime measures, with the default member TTL, how long
// the partitions of a member that dies without leaving (its connection
// cut: its key must expire) stay without an owner. The kill falls at a
// random point of the victim's heartbeat period. The README states the
// figure this test measures; RDMAWATCH_TAKEOVER_RUNS=N repeats it N times
// (one group each) and logs min, median and max:
//
//	RDMAWATCH_TAKEOVER_RUNS=12 go test -count=1 -run TestElasticTakeoverTime -v ./processor/engine/
func TestElasticTakeoverTime(t *testing.T) {
	if testing.Short() {
		t.Skip("takes ~12 s a run")
	}
	runs := 1
	if s := os.Getenv("RDMAWATCH_TAKEOVER_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("RDMAWATCH_TAKEOVER_RUNS=%q: want a positive count", s)
		}
		runs = n
	}
	srv := natstest.Start(t, &schemas.StreamOptions{Memory: true})
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var took []time.Duration
	for run := 0; run < runs; run++ {
		group := fmt.Sprintf("time%d", run)
		var ms []*member
		for i := 0; i < 2; i++ {
			ms = append(ms, startMember(t, srv.URL, Config{
				Group: group, Member: fmt.Sprintf("p%d", i),
				DetectorNames: []string{schemas.TypeLinkFlap},
				StartTime:     time.Now().Add(-time.Hour),
			}, logger.With("run", run, "m", i)))
		}
		testwait.For(t, 40*time.Second, "two members sharing the partitions", func() error {
			for _, m := range ms {
				if len(m.e.Members()) != 2 || len(m.e.Partitions()) != schemas.DefaultPartitions/2 {
					return fmt.Errorf("member %s sees %v, owns %v", m.e.Member(), m.e.Members(), m.e.Partitions())
				}
			}
			return nil
		})
		// Anywhere in the victim's heartbeat period.
		time.Sleep(time.Duration(rand.Int64N(int64(DefaultMemberTTL / 8))))
		killed := time.Now()
		ms[0].nc.Close()
		survivor := ms[1]
		testwait.For(t, 3*DefaultMemberTTL, "the survivor owning every partition", func() error {
			if n := len(survivor.e.Partitions()); n != schemas.DefaultPartitions {
				return fmt.Errorf("the survivor owns %d partitions", n)
			}
			return nil
		})
		d := time.Since(killed)
		took = append(took, d)
		t.Logf("run %d: partitions taken over %v after the kill", run, d.Round(10*time.Millisecond))
		// The key expires at most the TTL after the kill; the listing
		// aimed at it comes expiryMargin later. A beat period on top
		// is room for a loaded machine.
		if limit := DefaultMemberTTL + expiryMargin + DefaultMemberTTL/8; d > limit {
			t.Errorf("run %d: takeover took %v, more than %v", run, d, limit)
		}
		ms[1].cancel()
		<-ms[1].done
		ms[1].done <- nil // for the cleanup
	}
	slices.Sort(took)
	t.Logf("takeover with the default TTL %v over %d runs: min %v median %v max %v", DefaultMemberTTL, runs,
		took[0].Round(10*time.Millisecond), took[len(took)/2].Round(10*time.Millisecond), took[len(took)-1].Round(10*time.Millisecond))
}
