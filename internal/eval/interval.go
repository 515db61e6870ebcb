package eval

import (
	"errors"
	"io"
	"sort"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas/trace"
)

// TraceInterval is the median time between consecutive samples of a port
// over the whole trace: the "interval" of the matching rule.
func TraceInterval(path string) (time.Duration, error) {
	tr, err := trace.Open(path)
	if err != nil {
		return 0, err
	}
	defer tr.Close()
	type key struct {
		node, dev string
		port      int
	}
	last := map[key]time.Time{}
	var gaps []time.Duration
	for {
		l, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
		if l.Kind != trace.KindSample {
			continue
		}
		k := key{l.Node, l.Device, l.Port}
		if prev, ok := last[k]; ok && l.Time().After(prev) {
			gaps = append(gaps, l.Time().Sub(prev))
		}
		last[k] = l.Time()
	}
	if len(gaps) == 0 {
		return 0, errors.New("trace has no port with two samples: no interval")
	}
	sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
	return gaps[len(gaps)/2].Round(time.Millisecond), nil
}
