package deadletter

import (
	"fmt"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Payload is a dead letter's payload as a reader sees it.
type Payload struct {
	// Kind names what the stream carries: "counters batch", "event",
	// "inventory"; empty for a stream with no decoder.
	Kind string
	// Value is the decoded payload, ready for encoding/json; nil when it
	// did not decode.
	Value any
	// Err says why it did not decode.
	Err error
}

// Decode decodes a letter's payload with the decoder of the stream it came
// from, the one the refusing role used (schemas.DecodeBatch,
// schemas.DecodeEvent, schemas.DecodeInventory). Most letters are there
// because this fails; Err then says why, as the role saw it.
func Decode(l Letter) Payload {
	switch l.Stream {
	case schemas.StreamCounters:
		p := Payload{Kind: "counters batch"}
		b, err := schemas.DecodeBatch(l.Data)
		if err != nil {
			p.Err = err
			return p
		}
		p.Value = batchView(b)
		return p
	case schemas.StreamEvents:
		p := Payload{Kind: "event"}
		ev, err := schemas.DecodeEvent(l.Data)
		if err != nil {
			p.Err = err
			return p
		}
		p.Value = ev
		return p
	case schemas.StreamInventory:
		p := Payload{Kind: "inventory"}
		inv, err := schemas.DecodeInventory(l.Data)
		if err != nil {
			p.Err = err
			return p
		}
		p.Value = inv
		return p
	}
	return Payload{Err: fmt.Errorf("stream %q has no decoder", l.Stream)}
}

// batch, port and counter are a batch as JSON: names where the wire has
// numbers (a counter's source, its flags) and times in RFC 3339.
type batch struct {
	Version int    `json:"version"`
	Node    string `json:"node"`
	BootID  string `json:"boot_id"`
	Seq     uint64 `json:"seq"`
	Time    string `json:"time"`
	Ports   []port `json:"ports"`
}

type port struct {
	Device     string            `json:"device"`
	Port       int               `json:"port"`
	Netdev     string            `json:"netdev,omitempty"`
	LinkLayer  string            `json:"link_layer,omitempty"`
	State      string            `json:"state,omitempty"`
	Rate       string            `json:"rate,omitempty"`
	Time       string            `json:"time"`
	IntervalMs int64             `json:"interval_ms"`
	Counters   []counter         `json:"counters"`
	Gauges     map[string]uint64 `json:"gauges,omitempty"`
}

type counter struct {
	Counter string   `json:"counter"` // source/name
	Delta   uint64   `json:"delta"`
	Value   uint64   `json:"value,omitempty"`
	Flags   []string `json:"flags,omitempty"`
}

var flagNames = []struct {
	f    schemas.Flag
	name string
}{
	{schemas.FlagFirst, "first"}, {schemas.FlagReset, "reset"}, {schemas.FlagWrapped, "wrapped"},
	{schemas.FlagSaturated, "saturated"}, {schemas.FlagHeld, "held"},
}

func batchView(b *schemas.CounterBatch) batch {
	out := batch{Version: b.Version, Node: b.Node, BootID: b.BootID, Seq: b.Seq, Time: msTime(b.TimeMs), Ports: make([]port, 0, len(b.Ports))}
	for i := range b.Ports {
		p := &b.Ports[i]
		v := port{Device: p.Device, Port: p.Port, Netdev: p.Netdev, LinkLayer: p.LinkLayer, State: p.State, Rate: p.Rate,
			Time: msTime(p.TimeMs), IntervalMs: p.IntervalMs, Counters: make([]counter, 0, len(p.Counters)), Gauges: p.Gauges}
		for _, c := range p.Counters {
			cv := counter{Counter: c.Source.String() + "/" + c.Name, Delta: c.Delta, Value: c.Value}
			rest := c.Flags
			for _, fn := range flagNames {
				if rest&fn.f != 0 {
					cv.Flags = append(cv.Flags, fn.name)
					rest &^= fn.f
				}
			}
			if rest != 0 {
				cv.Flags = append(cv.Flags, fmt.Sprintf("0x%02x", uint8(rest)))
			}
			v.Counters = append(v.Counters, cv)
		}
		out.Ports = append(out.Ports, v)
	}
	return out
}

func msTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}
