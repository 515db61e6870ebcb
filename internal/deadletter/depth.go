package deadletter

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Origin is who refused a dead letter and where it came from: the two
// variable tokens of its subject.
type Origin struct{ Role, Stream string }

// Depth is how much the dead-letter stream holds.
type Depth struct {
	Messages, Bytes uint64
	// ByOrigin counts the messages per role and stream. The server keeps
	// a count per subject, not a size: bytes are the stream's total only.
	ByOrigin map[Origin]uint64
}

// Depth reads the stream's size and its message count per subject, one
// stream info request.
func (r *Reader) Depth(ctx context.Context) (Depth, error) {
	info, err := r.str.Info(ctx, jetstream.WithSubjectFilter(schemas.DeadLetterAllFilter))
	if err != nil {
		return Depth{}, fmt.Errorf("stream %s: %w", schemas.StreamDeadLetter, err)
	}
	d := Depth{Messages: info.State.Msgs, Bytes: info.State.Bytes, ByOrigin: map[Origin]uint64{}}
	for subj, n := range info.State.Subjects {
		role, stream, ok := parseDeadSubject(subj)
		if !ok {
			// Not a subject DeadLetterSubject makes; still counted.
			role, stream = "", subj
		}
		d.ByOrigin[Origin{role, stream}] += n
	}
	return d, nil
}

// Metric names; the namespace is telemetry.Namespace's, spelt out so that
// this package does not link every role's metrics.
const (
	MetricMessages = "rdmawatch_deadletter_messages"
	MetricBytes    = "rdmawatch_deadletter_bytes"
)

var (
	messagesDesc = prometheus.NewDesc(MetricMessages, "Messages in the dead-letter stream "+schemas.StreamDeadLetter+", by the role that refused them and the stream they came from.", []string{"role", "stream"}, nil)
	bytesDesc    = prometheus.NewDesc(MetricBytes, "Bytes the dead-letter stream "+schemas.StreamDeadLetter+" holds (its limit is max_bytes; the oldest letters are discarded beyond it).", nil, nil)
)

// DepthCollector exports the depth as the gauges MetricMessages (by role
// and stream) and MetricBytes, read from the stream at every collection.
// A role may register it as it is on its own registry.
func DepthCollector(r *Reader) prometheus.Collector { return depthCollector{r} }

type depthCollector struct{ r *Reader }

func (c depthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- messagesDesc
	ch <- bytesDesc
}

// collectTimeout bounds one collection: a scrape must not hang on NATS.
const collectTimeout = 5 * time.Second

func (c depthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	d, err := c.r.Depth(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(messagesDesc, err)
		return
	}
	origins := make([]Origin, 0, len(d.ByOrigin))
	for o := range d.ByOrigin {
		origins = append(origins, o)
	}
	sort.Slice(origins, func(i, j int) bool {
		if origins[i].Role != origins[j].Role {
			return origins[i].Role < origins[j].Role
		}
		return origins[i].Stream < origins[j].Stream
	})
	for _, o := range origins {
		ch <- prometheus.MustNewConstMetric(messagesDesc, prometheus.GaugeValue, float64(d.ByOrigin[o]), o.Role, o.Stream)
	}
	ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.GaugeValue, float64(d.Bytes))
}
