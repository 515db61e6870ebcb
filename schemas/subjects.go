package schemas

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

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

// CountersAllFilter selects every partition. A consumer that reads them
// all is cheaper for the server with no filter at all (the rdmawatch
// sink's and processor's): the server cannot tell that this filter matches
// every stored subject, and matches each message against it.
const CountersAllFilter = countersPrefix + ".*.*"

// Event subjects carry what an alerting system filters on, one token each:
//
//	rdmawatch.events.<layer>.<type>.<severity>.<state>.<scope>.<node>
//
// node is the SubjectToken of the subject's node, "_" for fabric scope.
// Every token goes through SubjectToken, so each is one token whatever the
// value. NATS wildcards then select, for example:
//
//	rdmawatch.events.>                        every event (the stream)
//	rdmawatch.events.*.pfc_storm.>            every PFC storm
//	rdmawatch.events.*.*.critical.>           everything critical
//	rdmawatch.events.physical.*.*.open.>      physical-layer incidents opening
//	rdmawatch.events.*.*.*.*.*.gpu-017        everything about node gpu-017
//
// EventsFilter builds such a filter from named fields.

// EventSubject is where a processor publishes an event.
func EventSubject(e *Event) string {
	var b strings.Builder
	b.WriteString(eventsPrefix)
	for _, tok := range [...]string{e.Layer, e.Type, e.Severity, e.State, e.Scope, e.Subject.Node} {
		b.WriteByte('.')
		b.WriteString(SubjectToken(tok))
	}
	return b.String()
}

// EventFilter selects events by the tokens of their subject; an empty field
// matches any value.
type EventFilter struct {
	Layer, Type, Severity, State, Scope, Node string
}

// EventsFilter is the NATS subject filter that selects the events f
// describes: each empty field becomes '*'.
func EventsFilter(f EventFilter) string {
	var b strings.Builder
	b.WriteString(eventsPrefix)
	for _, v := range [...]string{f.Layer, f.Type, f.Severity, f.State, f.Scope, f.Node} {
		b.WriteByte('.')
		if v == "" {
			b.WriteByte('*')
		} else {
			b.WriteString(SubjectToken(v))
		}
	}
	return b.String()
}

// EventsAllFilter selects every event.
const EventsAllFilter = eventsPrefix + ".>"

// InventorySubject is where a node's inventory goes.
func InventorySubject(node string) string { return inventoryPrefix + "." + SubjectToken(node) }

// InventoryAllFilter selects every inventory record.
const InventoryAllFilter = inventoryPrefix + ".*"

// ErrSubjectMismatch is wrapped by CheckBatchSubject and
// CheckInventorySubject: the message names another node than the subject it
// came on, so a collector allowed to publish for one node could write rows
// for another.
var ErrSubjectMismatch = errors.New("node does not match the subject")

// CheckBatchSubject checks that a batch came on its node's subject: the last
// token of subject must be the batch node's token, and subject must be
// rdmawatch.counters.<node> (as published) or
// rdmawatch.counters.<partition>.<node> (as stored after the stream's
// transform). NATS permissions bind a collector's credentials to a subject;
// this binds the message to it.
func CheckBatchSubject(subject string, b *CounterBatch) error {
	return checkNodeSubject(subject, countersPrefix, true, "batch", b.Node)
}

// CheckInventorySubject checks that an inventory came on
// rdmawatch.inventory.<node> of its own node.
func CheckInventorySubject(subject string, inv *Inventory) error {
	return checkNodeSubject(subject, inventoryPrefix, false, "inventory", inv.Node)
}

func checkNodeSubject(subject, prefix string, partitioned bool, what, node string) error {
	rest, ok := strings.CutPrefix(subject, prefix+".")
	if ok && partitioned {
		if part, tail, cut := strings.Cut(rest, "."); cut {
			ok = isDecimal(part)
			rest = tail
		}
	}
	if !ok || rest == "" || strings.Contains(rest, ".") {
		form := prefix + ".<node>"
		if partitioned {
			form += " or " + prefix + ".<partition>.<node>"
		}
		return fmt.Errorf("%w: %s of node %q on subject %q, want %s", ErrSubjectMismatch, what, node, subject, form)
	}
	if want := SubjectToken(node); rest != want {
		return fmt.Errorf("%w: %s of node %q (token %q) on subject %q (token %q)", ErrSubjectMismatch, what, node, want, subject, rest)
	}
	return nil
}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// SubjectToken makes a name safe as one subject token and keeps names
// apart: '.', '*', '>', '%', white space, control characters and bytes
// that are not UTF-8 are percent-encoded byte by byte, so gpu-017.pod-a
// stays one token. Since '%' itself is encoded, the mapping is injective:
// "gpu-\xff", "gpu-\xfe" and "gpu-\uFFFD" give three tokens. The empty
// name (fabric scope) is "_"; the name "_" itself is "%5F".
func SubjectToken(s string) string {
	switch s {
	case "":
		return "_"
	case "_":
		return "%5F"
	}
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '.' || c == '*' || c == '>' || c == '%' {
			clean = false
			break
		}
	}
	if clean { // the common case: a plain ASCII host name
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '.', r == '*', r == '>', r == '%',
			unicode.IsSpace(r), unicode.IsControl(r):
			for j := i; j < i+size; j++ {
				b.WriteByte('%')
				b.WriteByte(upperHex[s[j]>>4])
				b.WriteByte(upperHex[s[j]&0xf])
			}
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

const upperHex = "0123456789ABCDEF"

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

// CountersDuplicates is the counters stream's duplicate window: how long
// JetStream remembers a batch's Nats-Msg-Id, to drop the copy a collector
// re-sends when the ack of a stored batch was lost. Ten minutes covers a
// broker restart or failover with room to spare. JetStream keeps one id per
// host per interval for the whole window, so its memory grows with fleet x
// window; at 50 000 ports at 1 s, 2 minutes instead of 10 saved nats-server
// 0.02-0.05 cores and no latency that mattered (counters-duplicate-window),
// too little to give up the longer cover. `rdmawatch streams apply
// --duplicates` sets another window.
const CountersDuplicates = 10 * time.Minute

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
		Duplicates: CountersDuplicates,
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
