package schemas

import (
	"reflect"
	"testing"
)

// decoderSeeds are batches a BatchDecoder decodes in turn: different
// shapes one after the other, so memory handed out for one batch would
// show in the next if it were not cleared.
func decoderSeeds(t testing.TB) [][]byte {
	t.Helper()
	many := hostBatch()
	noGauges := sampleBatch()
	noGauges.Ports[0].Gauges = nil
	noPorts := sampleBatch()
	noPorts.Ports = nil
	var out [][]byte
	for _, b := range []*CounterBatch{fullBatch(), sampleBatch(), many, noGauges, noPorts, fullBatch(), many} {
		data, err := EncodeBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

func TestBatchDecoderEqualsDecodeBatch(t *testing.T) {
	var d BatchDecoder
	for i, data := range decoderSeeds(t) {
		want, err := DecodeBatch(data)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		got, err := d.Decode(data)
		if err != nil {
			t.Fatalf("batch %d: decoder: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("batch %d: the decoder's batch differs from DecodeBatch's:\n%+v\n%+v", i, got, want)
		}
	}
}

// TestBatchDecoderAllocates: once its memory has grown to the batches it
// sees, a decoder allocates nothing for a batch like one it decoded before.
func TestBatchDecoderAllocates(t *testing.T) {
	data, err := EncodeBatch(hostBatch())
	if err != nil {
		t.Fatal(err)
	}
	var d BatchDecoder
	if _, err := d.Decode(data); err != nil {
		t.Fatal(err)
	}
	fresh := testing.AllocsPerRun(20, func() {
		if _, err := DecodeBatch(data); err != nil {
			t.Fatal(err)
		}
	})
	reused := testing.AllocsPerRun(20, func() {
		if _, err := d.Decode(data); err != nil {
			t.Fatal(err)
		}
	})
	if reused != 0 {
		t.Errorf("a warm decoder allocates %.0f times per batch (DecodeBatch %.0f), want none", reused, fresh)
	}
}

// TestBatchDecoderAfterError: a batch refused half-way leaves nothing in
// the next one.
func TestBatchDecoderAfterError(t *testing.T) {
	seeds := decoderSeeds(t)
	var d BatchDecoder
	bad := append([]byte(nil), seeds[0]...)
	bad = bad[:len(bad)-3]
	if _, err := d.Decode(bad); err == nil {
		t.Fatal("a truncated batch decoded")
	}
	want, err := DecodeBatch(seeds[1])
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Decode(seeds[1])
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after a refused batch: %v\n%+v\n%+v", err, got, want)
	}
}
