//go:build !fleet

package main

// The terminal of a live run: events as they come and a progress line.

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/rdmawatch/rdmawatch/internal/pipeline"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// liveOutput serialises the terminal: events on stdout, the progress line on
// stderr (redrawn in place on a terminal, one line a second otherwise).
type liveOutput struct {
	mu             sync.Mutex
	stdout, stderr io.Writer
	tty            bool
	drawn          bool
	start          time.Time
}

func (o *liveOutput) clearLocked() {
	if o.tty && o.drawn {
		fmt.Fprint(o.stderr, "\r\033[K")
		o.drawn = false
	}
}

func (o *liveOutput) line(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.clearLocked()
	fmt.Fprintln(o.stdout, s)
}

func (o *liveOutput) event(ev *schemas.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.clearLocked()
	fmt.Fprintln(o.stdout, formatEvent(ev))
	if e := formatEvidence(ev); e != "" {
		fmt.Fprintln(o.stdout, "    "+e)
	}
}

func (o *liveOutput) progress(p pipeline.Progress) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if p.Published.IsZero() {
		return
	}
	s := fmt.Sprintf("progress: data %s (+%s)  %.0f samples/s  lag %s data time, %d batches  events %d  wall %s",
		p.Published.Format("15:04:05"), p.Published.Sub(o.start).Round(time.Second), p.SamplesPerSec,
		p.Lag().Round(100*time.Millisecond), p.Backlog, p.Events, p.Wall.Round(time.Second))
	if o.tty {
		fmt.Fprint(o.stderr, "\r\033[K"+s)
		o.drawn = true
		return
	}
	fmt.Fprintln(o.stderr, s)
}

func (o *liveOutput) endProgress() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.tty && o.drawn {
		fmt.Fprintln(o.stderr)
		o.drawn = false
	}
}

// isTerminal reports whether w is a terminal. A character device is not
// enough: /dev/null is one, and redrawing a line there is noise in a log.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
