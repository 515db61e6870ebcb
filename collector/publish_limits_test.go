package collector

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// syncBuffer is a log sink the publisher and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestEngineSplit(t *testing.T) {
	e := NewEngine(nil)
	r := &Reading{Node: "n1", Time: t0}
	for i := range 10 {
		r.Ports = append(r.Ports, PortReading{Device: "mlx5_0", Port: i + 1, Time: t0, Counters: map[string]uint64{"symbol_error": 1}})
	}
	b := e.Apply(r)
	tests := []struct {
		maxPorts  int
		wantParts int
	}{{10, 1}, {5, 2}, {3, 4}, {1, 10}}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("at most %d ports", tc.maxPorts), func(t *testing.T) {
			e := NewEngine(nil)
			b := e.Apply(r)
			parts := e.Split(b, func(p *schemas.CounterBatch) bool { return len(p.Ports) <= tc.maxPorts })
			if len(parts) != tc.wantParts {
				t.Fatalf("%d parts, want %d", len(parts), tc.wantParts)
			}
			ports, ids := 0, map[string]bool{}
			for i, p := range parts {
				if p.Seq != uint64(i+1) || ids[p.MsgID()] {
					t.Errorf("part %d: seq %d, id %s (seen %v)", i, p.Seq, p.MsgID(), ids[p.MsgID()])
				}
				ids[p.MsgID()] = true
				ports += len(p.Ports)
			}
			if ports != 10 {
				t.Errorf("%d ports in the parts, want 10", ports)
			}
			// The next batch continues after the parts.
			r2 := *r
			r2.Time = t0.Add(time.Second)
			r2.Ports = []PortReading{{Device: "mlx5_0", Port: 1, Time: r2.Time, Counters: map[string]uint64{"symbol_error": 2}}}
			if next := e.Apply(&r2); next.Seq != uint64(len(parts)+1) {
				t.Errorf("next batch seq %d, want %d", next.Seq, len(parts)+1)
			}
		})
	}
	_ = b
}

// startSmallPayloadJS runs a JetStream server whose max_payload is small,
// so an ordinary reading does not fit one message.
func startSmallPayloadJS(t *testing.T, maxPayload int32) jetstream.JetStream {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true, MaxPayload: maxPayload})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	_, js := natstest.Connect(t, s.ClientURL())
	if err := natsutil.EnsureStreams(context.Background(), js, schemas.StreamOptions{Memory: true, Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	return js
}

// manyPorts is one reading of n ports, then EOF.
type manyPorts struct {
	n    int
	done bool
}

func (s *manyPorts) Next(ctx context.Context) (*Reading, error) {
	if s.done {
		return nil, io.EOF
	}
	s.done = true
	r := &Reading{Node: "big-node", Time: t0}
	for i := range s.n {
		r.Ports = append(r.Ports, PortReading{Device: fmt.Sprintf("mlx5_%d", i/2), Port: i%2 + 1, Time: t0,
			Counters: map[string]uint64{"symbol_error": 1, "port_xmit_data": 100, "port_rcv_data": 100, "link_downed": 0}})
	}
	return r, nil
}

// TestCollectorBoundsMessages is issue 8.9 at the collector: a reading too
// large for one message goes out as several (each its own seq and
// Nats-Msg-Id, every sample once), and ports past maxBatchPorts are refused
// with an error naming the node and the count.
func TestCollectorBoundsMessages(t *testing.T) {
	tests := []struct {
		name       string
		ports      int
		maxPayload int32
		wantPorts  int
		minMsgs    int
		refused    bool
	}{
		{"fits one message", 8, 1 << 20, 8, 1, false},
		{"split by the server's max_payload", 1000, 16 << 10, 1000, 4, false},
		{"ports past the bound refused", maxBatchPorts + 300, 1 << 20, maxBatchPorts, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			js := startSmallPayloadJS(t, tc.maxPayload)
			var logs syncBuffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			pub := NewPublisher(js, 16, log)
			if err := New(&manyPorts{n: tc.ports}, NewEngine(nil), pub, Config{Log: log}).Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			s, err := js.Stream(context.Background(), schemas.StreamCounters)
			if err != nil {
				t.Fatal(err)
			}
			info, _ := s.Info(context.Background())
			if int(info.State.Msgs) < tc.minMsgs {
				t.Errorf("%d messages, want at least %d", info.State.Msgs, tc.minMsgs)
			}
			ports, ids := 0, map[string]bool{}
			for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
				m, err := s.GetMsg(context.Background(), seq)
				if err != nil {
					t.Fatal(err)
				}
				if len(m.Data) > int(tc.maxPayload) {
					t.Errorf("message %d: %d bytes > max_payload %d", seq, len(m.Data), tc.maxPayload)
				}
				b, err := schemas.DecodeBatch(m.Data)
				if err != nil {
					t.Fatal(err)
				}
				id := m.Header.Get(jetstream.MsgIDHeader)
				if ids[id] || id != b.MsgID() {
					t.Errorf("message %d: id %q (batch %s) repeated or wrong", seq, id, b.MsgID())
				}
				ids[id] = true
				ports += len(b.Ports)
			}
			if ports != tc.wantPorts {
				t.Errorf("%d port samples on the stream, want %d", ports, tc.wantPorts)
			}
			refusal := fmt.Sprintf("node=big-node ports=%d max=%d refused=%d", tc.ports, maxBatchPorts, tc.ports-maxBatchPorts)
			if got := strings.Contains(logs.String(), refusal); got != tc.refused {
				t.Errorf("refusal logged %v, want %v (%q):\n%s", got, tc.refused, refusal, logs.String())
			}
		})
	}
}

func TestPublisherRefusesOversizedBatch(t *testing.T) {
	js := startSmallPayloadJS(t, 4<<10)
	pub := NewPublisher(js, 4, nil)
	b := &schemas.CounterBatch{Node: "n", BootID: "b", Seq: 1, TimeMs: 1}
	for i := range 200 {
		b.Ports = append(b.Ports, schemas.PortSample{Device: "mlx5_0", Port: i + 1, TimeMs: 1, Netdev: strings.Repeat("x", 15)})
	}
	if err := pub.PublishBatch(context.Background(), b); err == nil || !strings.Contains(err.Error(), ErrMessageTooLarge.Error()) {
		t.Fatalf("PublishBatch of a %d-port batch over a 4 KiB max_payload: %v, want ErrMessageTooLarge", len(b.Ports), err)
	}
}
