package schemas

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stream and subject names. Collectors publish a node's batches on
// CountersSubject(node); the counters stream rewrites that subject to
// rdmawatch.counters.<partition>.<node> with a deterministic hash of the node,
// so every batch of a node, and so every sample of a port, lands in one
// partition that exactly one processor instance consumes.
const (
	StreamCounters  = "RDMAWATCH_COUNTERS"
	StreamEvents    = "RDMAWATCH_EVENTS"
	StreamInventory = "RDMAWATCH_INVENTORY"

	countersPrefix  = "rdmawatch.counters"
	eventsPrefix    = "rdmawatch.events"
	inventoryPrefix = "rdmawatch.inventory"

	// DefaultPartitions is the partition count of a new counters stream.
	DefaultPartitions = 16
)

// CountersSubject is where a node's collector publishes.
func CountersSubject(node string) string { return countersPrefix + "." + SubjectToken(node) }

// CountersPartitionFilter selects one partition of the counters stream.
func CountersPartitionFilter(partition int) string {
	return fmt.Sprintf("%s.%d.*", countersPrefix, partition)
}

// CountersAllFilter selects every partition.
const CountersAllFilter = countersPrefix + ".*.*"

// EventsSubject is where processors publish an event.
func EventsSubject(typ, scope string) string {
	return eventsPrefix + "." + SubjectToken(typ) + "." + SubjectToken(scope)
}

// EventsAllFilter selects every event.
const EventsAllFilter = eventsPrefix + ".>"

// InventorySubject is where a node's inventory goes.
func InventorySubject(node string) string { return inventoryPrefix + "." + SubjectToken(node) }

// InventoryAllFilter selects every inventory record.
const InventoryAllFilter = inventoryPrefix + ".*"

// SubjectToken makes a host name safe as one subject token: '.', '*', '>',
// white space and '%' are percent-encoded, so gpu-017.pod-a stays one token
// and two names never share a token.
func SubjectToken(s string) string {
	if s == "" {
		return "_"
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '.' || r == '*' || r == '>' || r == '%' || r <= ' ' || r == 0x7f:
			fmt.Fprintf(&b, "%%%02X", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// StreamOptions sizes the streams; the zero value gives the defaults.
type StreamOptions struct {
	Partitions int
	Replicas   int
	// MaxAge bounds how long raw batches are kept on the stream: long enough
	// for a processor to rebuild its windows after a restart.
	MaxAge time.Duration
	// Memory keeps the streams in memory (replay, tests).
	Memory bool
}

func (o StreamOptions) withDefaults() StreamOptions {
	if o.Partitions <= 0 {
		o.Partitions = DefaultPartitions
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.MaxAge <= 0 {
		o.MaxAge = 6 * time.Hour
	}
	return o
}

// CountersStream is the counters stream's configuration.
func CountersStream(o StreamOptions) jetstream.StreamConfig {
	o = o.withDefaults()
	return jetstream.StreamConfig{
		Name:        StreamCounters,
		Description: "rdmawatch per-node counter batches (msgpack), partitioned by node",
		Subjects:    []string{countersPrefix + ".*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{
			Source:      countersPrefix + ".*",
			Destination: fmt.Sprintf("%s.{{partition(%d,1)}}.{{wildcard(1)}}", countersPrefix, o.Partitions),
		},
		Retention:  jetstream.LimitsPolicy,
		MaxAge:     o.MaxAge,
		Storage:    storage(o),
		Replicas:   o.Replicas,
		Duplicates: 10 * time.Minute,
		Discard:    jetstream.DiscardOld,
	}
}

// EventsStream is the events stream's configuration.
func EventsStream(o StreamOptions) jetstream.StreamConfig {
	o = o.withDefaults()
	return jetstream.StreamConfig{
		Name:        StreamEvents,
		Description: "rdmawatch incident state changes (msgpack)",
		Subjects:    []string{EventsAllFilter},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      30 * 24 * time.Hour,
		Storage:     storage(o),
		Replicas:    o.Replicas,
		Duplicates:  10 * time.Minute,
	}
}

// InventoryStream keeps the latest inventories of every node.
func InventoryStream(o StreamOptions) jetstream.StreamConfig {
	o = o.withDefaults()
	return jetstream.StreamConfig{
		Name:              StreamInventory,
		Description:       "rdmawatch node/port inventory (msgpack)",
		Subjects:          []string{InventoryAllFilter},
		Retention:         jetstream.LimitsPolicy,
		MaxMsgsPerSubject: 8,
		Storage:           storage(o),
		Replicas:          o.Replicas,
		Duplicates:        10 * time.Minute,
	}
}

func storage(o StreamOptions) jetstream.StorageType {
	if o.Memory {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// Streams lists every stream rdmawatch uses.
func Streams(o StreamOptions) []jetstream.StreamConfig {
	return []jetstream.StreamConfig{CountersStream(o), EventsStream(o), InventoryStream(o), DeadLetterStream(o)}
}
