package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxLineBytes bounds one line: a sample with a full ethtool set is a few
// KiB.
const MaxLineBytes = 4 << 20

// Reader reads trace lines and counts them, so errors name the line.
type Reader struct {
	sc     *bufio.Scanner
	closer io.Closer
	name   string
	line   int
}

// Open opens a trace file; a .gz file (or any gzip stream) is read as gzip.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open trace: %w", err)
	}
	r, err := NewReader(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closer = multiCloser{r.closer, f}
	return r, nil
}

type multiCloser []io.Closer

func (m multiCloser) Close() error {
	var errs []error
	for _, c := range m {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// NewReader reads a trace from r, as gzip when it starts with gzip's magic
// bytes; name is used in error messages.
func NewReader(r io.Reader, name string) (*Reader, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var closer io.Closer
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: gzip: %v", ErrMalformed, name, err)
		}
		closer = zr
		r = zr
	} else {
		r = br
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), MaxLineBytes)
	return &Reader{sc: sc, closer: closer, name: name}, nil
}

// Next returns the next line, io.EOF at the end, or an error wrapping
// ErrMalformed that names the file and line. Blank lines are skipped.
func (r *Reader) Next() (*Line, error) {
	for r.sc.Scan() {
		r.line++
		data := bytes.TrimSpace(r.sc.Bytes())
		if len(data) == 0 {
			continue
		}
		l, err := Parse(data)
		if err != nil {
			return nil, fmt.Errorf("%w: %s line %d: %v", ErrMalformed, r.name, r.line, err)
		}
		return l, nil
	}
	if err := r.sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s after line %d: %v", ErrMalformed, r.name, r.line, err)
	}
	return nil, io.EOF
}

// Line is the number of the last line read.
func (r *Reader) Line() int { return r.line }

// Close closes the gzip stream and the file Open opened.
func (r *Reader) Close() error {
	if r.closer == nil {
		return nil
	}
	return r.closer.Close()
}
