package collector

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// spoolMagic heads every spool file; the format is
//
//	RDMAWATCH-SPOOL 1\n<subject>\n<Nats-Msg-Id>\n<samples>\n<data bytes>\n<data>
//
// one message per file, named <unix-nanos>-<n>.msg so name order is age.
const spoolMagic = "RDMAWATCH-SPOOL 1"

// spoolDefaultMaxBytes bounds a spool configured without a bound.
const spoolDefaultMaxBytes = 256 << 20

var spoolSeq atomic.Uint64

// spool is a directory of messages a publisher could not send before it
// stopped, the way Vector's and Fluent Bit's disk buffers keep them:
// bounded, oldest dropped first, every drop counted.
type spool struct {
	dir      string
	maxBytes int64
	dropped  DropCount
}

type spoolEntry struct {
	name string
	size int64
}

func openSpool(dir string, maxBytes int64) (*spool, error) {
	if maxBytes <= 0 {
		maxBytes = spoolDefaultMaxBytes
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("spool dir: %w", err)
	}
	return &spool{dir: dir, maxBytes: maxBytes}, nil
}

// list returns the spooled messages, oldest first.
func (s *spool) list() ([]spoolEntry, error) {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	var out []spoolEntry
	for _, de := range des {
		if !de.Type().IsRegular() || !strings.HasSuffix(de.Name(), ".msg") {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, spoolEntry{name: de.Name(), size: info.Size()})
	}
	slices.SortFunc(out, func(a, b spoolEntry) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// write stores msg durably (file and directory fsynced), dropping the
// oldest spooled messages first when the bound would be passed.
func (s *spool) write(msg *nats.Msg, samples int) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%s\n%s\n%s\n%d\n%d\n", spoolMagic, msg.Subject, msg.Header.Get(jetstream.MsgIDHeader), samples, len(msg.Data))
	buf.Write(msg.Data)
	size := int64(buf.Len())
	if size > s.maxBytes {
		s.dropped.Messages++
		s.dropped.Samples += uint64(samples)
		return nil
	}
	entries, err := s.list()
	if err != nil {
		return err
	}
	var total int64
	for _, e := range entries {
		total += e.size
	}
	for len(entries) > 0 && total+size > s.maxBytes {
		e := entries[0]
		entries = entries[1:]
		_, n, _ := s.read(e.name)
		if err := os.Remove(filepath.Join(s.dir, e.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("spool: drop %s: %w", e.name, err)
		}
		total -= e.size
		s.dropped.Messages++
		s.dropped.Samples += uint64(n)
	}
	name := fmt.Sprintf("%020d-%06d.msg", time.Now().UnixNano(), spoolSeq.Add(1)%1_000_000)
	tmp, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	_, err = tmp.Write(buf.Bytes())
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(s.dir, name))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("spool: write %s: %w", name, err)
	}
	return syncDir(s.dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("spool: sync %s: %w", dir, err)
	}
	return nil
}

// read decodes one spool file into the message to send again and its
// sample count.
func (s *spool) read(name string) (*nats.Msg, int, error) {
	f, err := os.Open(filepath.Join(s.dir, name))
	if err != nil {
		return nil, 0, fmt.Errorf("spool: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(io.LimitReader(f, s.maxBytes+4096))
	var lines [5]string
	for i := range lines {
		l, err := r.ReadString('\n')
		if err != nil {
			return nil, 0, fmt.Errorf("spool %s: header line %d: %w", name, i+1, err)
		}
		lines[i] = strings.TrimSuffix(l, "\n")
	}
	if lines[0] != spoolMagic || lines[1] == "" || lines[2] == "" {
		return nil, 0, fmt.Errorf("spool %s: not a spool file (header %q)", name, lines[0])
	}
	samples, err := strconv.Atoi(lines[3])
	if err != nil || samples < 0 {
		return nil, 0, fmt.Errorf("spool %s: samples %q", name, lines[3])
	}
	size, err := strconv.ParseInt(lines[4], 10, 64)
	if err != nil || size < 0 || size > s.maxBytes {
		return nil, 0, fmt.Errorf("spool %s: data length %q", name, lines[4])
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, 0, fmt.Errorf("spool %s: data: %w", name, err)
	}
	msg := &nats.Msg{Subject: lines[1], Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, lines[2])
	return msg, samples, nil
}

func (s *spool) remove(name string) {
	os.Remove(filepath.Join(s.dir, name))
}

func (s *spool) takeDropped() DropCount {
	d := s.dropped
	s.dropped = DropCount{}
	return d
}
