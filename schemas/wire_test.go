package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func sampleBatch() *CounterBatch {
	return &CounterBatch{
		Node: "gpu-017.pod-a", BootID: "3f2a", Seq: 42, TimeMs: 1773446405010,
		Ports: []PortSample{{
			Device: "mlx5_0", Port: 1, Netdev: "ens1f0np0", LinkLayer: "Ethernet", State: "ACTIVE",
			Rate: "200 Gb/sec (4X HDR)", TimeMs: 1773446405010, IntervalMs: 5000,
			Counters: []CounterDelta{
				{Name: "symbol_error", Source: SourceCounters, Delta: 0, Value: 65535, Flags: FlagSaturated},
				{Name: "port_xmit_data", Source: SourceCounters, Delta: 3600000000, Value: 10000000000},
				{Name: "np_cnp_sent", Source: SourceHWCounters, Delta: 7, Value: 4, Flags: FlagWrapped},
				{Name: "tx_prio3_pause_duration", Source: SourceEthtool, Delta: 4800000, Value: 4800700},
			},
			Gauges: map[string]uint64{"lifespan": 10},
		}},
	}
}

// onWire is what a batch looks like after the wire: counters in dictionary
// order (then the unknown ones, which keep their values) and raw values of
// known counters only where a flag is set.
func onWire(b *CounterBatch) *CounterBatch {
	out := *b
	out.Version = Version
	out.Ports = append([]PortSample(nil), b.Ports...)
	for i := range out.Ports {
		p := &out.Ports[i]
		var known, extra []CounterDelta
		for _, c := range p.Counters {
			if _, ok := dictIndex[dictKey{c.Source, c.Name}]; ok {
				if c.Flags == 0 {
					c.Value = 0
				}
				known = append(known, c)
			} else {
				extra = append(extra, c)
			}
		}
		sort.SliceStable(known, func(a, b int) bool {
			return dictIndex[dictKey{known[a].Source, known[a].Name}] < dictIndex[dictKey{known[b].Source, known[b].Name}]
		})
		p.Counters = append(known, extra...)
	}
	return &out
}

func TestBatchRoundTrip(t *testing.T) {
	in := sampleBatch()
	in.Ports[0].Counters = append(in.Ports[0].Counters, CounterDelta{Name: "vendor_specific_thing", Source: SourceEthtool, Delta: 3, Value: 99})
	in.Ports = append(in.Ports, PortSample{Device: "mlx5_1", Port: 2, LinkLayer: "InfiniBand", TimeMs: 1773446405011, IntervalMs: 0,
		Counters: []CounterDelta{{Name: "link_downed", Source: SourceCounters, Value: 255, Flags: FlagFirst | FlagSaturated}}})
	data, err := EncodeBatch(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeBatch(data)
	if err != nil {
		t.Fatal(err)
	}
	// Every counter is found through the decoder's index as by a scan.
	for _, p := range out.Ports {
		if !p.indexed {
			t.Fatalf("decoded port %s/%d is not indexed", p.Device, p.Port)
		}
		for _, c := range p.Counters {
			got, ok := p.Counter(c.Source, c.Name)
			if !ok || got != c {
				t.Errorf("indexed lookup of %s/%s = %+v %v, want %+v", c.Source, c.Name, got, ok, c)
			}
			if id, known := LookupCounterID(c.Source, c.Name); known {
				if got, ok := p.CounterByID(id); !ok || got != c {
					t.Errorf("CounterByID(%s) = %+v", c.Name, got)
				}
			}
		}
		if _, ok := p.CounterByID(MustCounterID(SourceEthtool, "rx_prio7_bytes")); ok {
			t.Errorf("a counter not read was found")
		}
		scanned := p
		scanned.indexed = false
		if _, ok := scanned.CounterByID(MustCounterID(SourceCounters, "symbol_error")); ok != (p.Device == "mlx5_0") {
			t.Errorf("CounterByID by scan on %s: %v", p.Device, ok)
		}
	}
	for i := range out.Ports {
		out.Ports[i].present, out.Ports[i].indexed = [dictWords]uint64{}, false
	}
	if want := onWire(in); !reflect.DeepEqual(want, out) {
		t.Fatalf("round trip changed the batch:\nwant %+v\n got %+v", want, out)
	}
	c, ok := out.Ports[0].Counter(SourceHWCounters, "np_cnp_sent")
	if !ok || c.Delta != 7 || c.Flags != FlagWrapped || c.Value != 4 {
		t.Errorf("Counter lookup: %+v %v", c, ok)
	}
	if _, ok := out.Ports[0].Counter(SourceEthtool, "np_cnp_sent"); ok {
		t.Errorf("Counter must match the source too")
	}
	if got := in.MsgID(); got != "gpu-017.pod-a/3f2a/42" {
		t.Errorf("msg id %q", got)
	}
}

func TestBatchEncodingIsMsgpack(t *testing.T) {
	data, err := EncodeBatch(sampleBatch())
	if err != nil {
		t.Fatal(err)
	}
	var generic []any
	if err := msgpack.Unmarshal(data, &generic); err != nil {
		t.Fatalf("a generic msgpack reader cannot read the batch: %v", err)
	}
	if len(generic) != 6 || generic[1] != "gpu-017.pod-a" {
		t.Fatalf("generic decode: %v", generic)
	}
}

func TestCounterDictUnique(t *testing.T) {
	if len(dictIndex) != len(counterDict) {
		t.Fatalf("%d names for %d entries", len(dictIndex), len(counterDict))
	}
}

func TestDecodeBatchRejects(t *testing.T) {
	data, _ := EncodeBatch(sampleBatch())
	future := append([]byte{}, data...)
	future[1] = Version + 1 // the version is the first element
	noNodeBatch := sampleBatch()
	noNodeBatch.Node = ""
	noNode, _ := EncodeBatch(noNodeBatch)
	v1, _ := msgpack.Marshal(map[string]any{"v": 1, "n": "a"})
	futureData := future
	// Port 70000: EncodeBatch refuses it, so the first port's 65535 (uint16
	// after its device name) is rewritten as a uint32.
	bigPortBatch := sampleBatch()
	bigPortBatch.Ports[0].Port = MaxPort
	bigPort, err := EncodeBatch(bigPortBatch)
	if err != nil {
		t.Fatal(err)
	}
	dev := bigPortBatch.Ports[0].Device
	at := append(append([]byte{0xa0 | byte(len(dev))}, dev...), 0xcd, 0xff, 0xff)
	if !bytes.Contains(bigPort, at) {
		t.Fatalf("port %d of %s not found in the encoding", MaxPort, dev)
	}
	bigPort = bytes.Replace(bigPort, at, append(at[:len(at)-3:len(at)-3], 0xce, 0x00, 0x01, 0x11, 0x70), 1)
	if _, err := DecodeBatch(bytes.Replace(bigPort, []byte{0xce, 0x00, 0x01, 0x11, 0x70}, []byte{0xce, 0x00, 0x00, 0xff, 0xff}, 1)); err != nil {
		t.Fatalf("port 65535 as a uint32: %v", err)
	}
	tooBig := sampleBatch()
	tooBig.Ports[0].Port = MaxPort + 1
	if _, err := EncodeBatch(tooBig); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("EncodeBatch of port %d: %v, want out of range", MaxPort+1, err)
	}

	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"garbage", []byte{0xc1, 0x00}, "decode counter batch"},
		{"future version", futureData, "unsupported schema version"},
		{"empty node", noNode, "empty node"},
		{"truncated", data[:len(data)/2], "decode counter batch"},
		{"version 1 map form", v1, "unsupported schema version 1"},
		{"port above 65535", bigPort, "port number 70000 is out of range 1-65535"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeBatch(tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if tc.name == "future version" && !errors.Is(err, ErrVersion) {
				t.Errorf("not errors.Is(ErrVersion)")
			}
		})
	}
}

func sampleEvent() *Event {
	end := Millis(1773446470000)
	return &Event{
		ID: EventID(TypePFCStorm, Subject{Node: "host-a", Device: "mlx5_0", Port: 1}, 1773446405010), Type: TypePFCStorm,
		State: StateResolved, Severity: SeverityCritical, Scope: ScopePort,
		Subject: Subject{Node: "host-a", Device: "mlx5_0", Port: 1},
		Start:   1773446405010, DetectedAt: 1773446410030, End: &end, Layer: LayerLinkNetwork,
		Summary:    "host-a mlx5_0/1 is pausing leaf-01 96% of the time",
		Evidence:   map[string]any{"tx_pause_fraction": 0.96, "tx_pause_frames_per_s": int64(12180)},
		NextChecks: []string{"ethtool -S ens1f0np0"},
		Origin:     &Origin{Node: "host-a", Device: "mlx5_0", Port: 1},
		Affected:   []Affected{{Node: "host-b", Device: "mlx5_0", Port: 1, FirstSeen: 1773446410030, Hops: 2, PauseFraction: 0.58}},
		Revision:   3,
	}
}

func TestEventRoundTrip(t *testing.T) {
	in := sampleEvent()
	data, err := EncodeEvent(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeEvent(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip changed the event:\n in %+v\nout %+v", in, out)
	}
	if in.MsgID() != "pfc_storm/host-a/mlx5_0/1/1773446405#3" {
		t.Errorf("msg id %q", in.MsgID())
	}
}

// TestEventJSONContract checks the JSON form against docs/formats.md's field list
// and the shared example.
func TestEventJSONContract(t *testing.T) {
	ev := sampleEvent()
	ev.State, ev.End = StateOpen, nil
	data, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"id", "type", "state", "severity", "scope", "subject", "start", "detected_at", "end", "layer", "summary", "evidence", "next_checks", "origin", "affected"} {
		if _, ok := m[f]; !ok {
			t.Errorf("JSON lacks %q: %s", f, data)
		}
	}
	if m["end"] != nil {
		t.Errorf("open event end = %v, want null", m["end"])
	}
	if m["start"] != "2026-03-14T00:00:05.010Z" {
		t.Errorf("start %v, want RFC 3339 with ms", m["start"])
	}
	var back Event
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Start != ev.Start || back.Affected[0].FirstSeen != ev.Affected[0].FirstSeen {
		t.Errorf("JSON round trip of times: %+v", back)
	}
	fab, _ := json.Marshal(&Event{Subject: Subject{}})
	if !strings.Contains(string(fab), `"subject":{}`) {
		t.Errorf("fabric subject must be {}: %s", fab)
	}
}

func TestEventValidate(t *testing.T) {
	ok := sampleEvent()
	tests := []struct {
		name string
		mut  func(e *Event)
		want string
	}{
		{"valid", func(e *Event) {}, ""},
		{"no id", func(e *Event) { e.ID = "" }, "empty id"},
		{"bad state", func(e *Event) { e.State = "closed" }, "state"},
		{"port scope without port", func(e *Event) { e.Subject.Port = 0 }, "port scope"},
		{"resolved without end", func(e *Event) { e.End = nil }, "without end"},
		{"node scope", func(e *Event) { e.Scope = ScopeNode; e.Subject = Subject{Node: "a"} }, ""},
		{"fabric scope", func(e *Event) { e.Scope = ScopeFabric; e.Subject = Subject{} }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := *ok
			tc.mut(&e)
			err := e.Validate()
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

// go test -run '^$' -fuzz '^FuzzDecodeBatch$' -fuzztime 60s ./schemas
// fuzzBatchSeeds are small batches, each reaching a different part of the
// decoder: shared strings, counters by name, gauges, no counters, fields a
// newer writer may add. Small on purpose: the fuzzer mutates and, for
// every input that finds new coverage, minimizes it, which costs one run
// per byte tried; with only 7 KB batches to start from (every dictionary
// counter), minimizing took the workers' whole time and coverage stopped
// growing after about 3 s.
func fuzzBatchSeeds(t testing.TB) [][]byte {
	t.Helper()
	one := func(mut func(*CounterBatch)) *CounterBatch {
		b := sampleBatch()
		mut(b)
		return b
	}
	batches := []*CounterBatch{
		sampleBatch(),
		one(func(b *CounterBatch) { b.Ports = nil }),
		one(func(b *CounterBatch) { b.Ports[0].Counters, b.Ports[0].Gauges = nil, nil }),
		one(func(b *CounterBatch) {
			// A counter by name, after the dictionary's.
			b.Ports[0].Counters = append(b.Ports[0].Counters[:1], CounterDelta{Name: "vendor_x", Source: SourceEthtool, Delta: 1, Value: 1 << 63, Flags: FlagFirst | FlagHeld})
		}),
		one(func(b *CounterBatch) {
			// A second port: its strings refer to the first's.
			p := b.Ports[0]
			p.Port, p.TimeMs, p.Counters = 2, p.TimeMs+1, p.Counters[1:2]
			p.Gauges = map[string]uint64{"lifespan": 1, "x": 1 << 40}
			b.Ports = append(b.Ports, p)
		}),
		one(func(b *CounterBatch) {
			b.Ports[0].LinkLayer, b.Ports[0].Netdev, b.Ports[0].IntervalMs = "InfiniBand", "", 0
			b.Ports[0].Counters = b.Ports[0].Counters[:1]
		}),
	}
	var out [][]byte
	for _, b := range batches {
		data, err := EncodeBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
	// Fields a newer writer appends: one more in the batch and in a port.
	b := appendArrayLen(nil, 7)
	b = appendUint(b, Version)
	b = appendString(b, "gpu-a")
	b = appendString(b, "boot")
	b = appendUint(b, 1)
	b = appendInt(b, 1773446405010)
	b = appendArrayLen(b, 1)
	b = appendArrayLen(b, 12)
	b = appendString(b, "mlx5_0")
	b = appendUint(b, 1)
	for range 4 {
		b = appendString(b, "")
	}
	b = appendInt(b, 1773446405010)
	b = appendInt(b, 1000)
	b = appendBin(b, []byte{0, 0}) // no bitmap, no flagged counters
	b = append(b, 0xc0, 0xc0, 0xc0, 0xc0)
	if _, err := DecodeBatch(b); err != nil {
		t.Fatalf("the newer writer's batch: %v", err)
	}
	return append(out, b)
}

func FuzzDecodeBatch(f *testing.F) {
	for _, data := range fuzzBatchSeeds(f) {
		f.Add(data)
	}
	f.Add([]byte{})
	f.Add([]byte{0x80})
	// The batch the reuse check decodes first: small, because it is
	// decoded before every input; a large one (every dictionary counter)
	// made each run cost ~0.2 ms and minimizing a new input take seconds.
	// TestBatchDecoderEqualsDecodeBatch reuses decoders across large
	// batches.
	prime, err := EncodeBatch(sampleBatch())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeBatch(data)
		// A decoder that decoded another batch first must decode this
		// one exactly as DecodeBatch does, error included.
		var d BatchDecoder
		if _, err := d.Decode(prime); err != nil {
			t.Fatal(err)
		}
		reused, rerr := d.Decode(data)
		if (err == nil) != (rerr == nil) || (err != nil && err.Error() != rerr.Error()) {
			t.Fatalf("DecodeBatch: %v; BatchDecoder: %v", err, rerr)
		}
		if err != nil {
			if strings.Contains(err.Error(), "<nil>") {
				t.Fatalf("error prints <nil>: %v", err)
			}
			return
		}
		if !reflect.DeepEqual(b, reused) {
			t.Fatalf("BatchDecoder decoded differently:\n%+v\n%+v", b, reused)
		}
		if b.Node == "" || b.Version != Version || len(b.Ports) > MaxBatchPorts {
			t.Fatalf("accepted an invalid batch: %+v", b)
		}
		again, err := EncodeBatch(b)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := DecodeBatch(again)
		if err != nil {
			t.Fatalf("decode of re-encoded batch: %v", err)
		}
		if !reflect.DeepEqual(b, back) {
			t.Fatalf("re-encoding changed the batch:\n%+v\n%+v", b, back)
		}
	})
}

func FuzzDecodeEvent(f *testing.F) {
	good, _ := EncodeEvent(sampleEvent())
	f.Add(good)
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := DecodeEvent(data)
		if err != nil {
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("decoder accepted an invalid event: %v", err)
		}
		if _, err := json.Marshal(e); err != nil {
			t.Fatalf("accepted event does not marshal to JSON: %v", err)
		}
	})
}
