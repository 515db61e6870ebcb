package jsbatch

import (
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// Window tells whether a message arriving now may have been stored already
// whatever its delivery count: for a while after Open and after each
// reconnect of the connection. A broker restarted from its store can hand
// out again, as delivered once, messages a consumer stored before it died
// or before the broker lost its ack, so NumDelivered alone cannot tell.
// One Window serves every Consumer on one connection (Config.Suspect =
// Window.Active).
type Window struct {
	nc *nats.Conn
	d  time.Duration
	// until (unix ns) ends the window; reconnects is the connection's
	// count when it was last looked at.
	until      atomic.Int64
	reconnects atomic.Uint64
}

// NewWindow returns a Window of d (negative: none) on nc (nil: no
// reconnects are seen). It is closed until Open.
func NewWindow(nc *nats.Conn, d time.Duration) *Window {
	return &Window{nc: nc, d: max(d, 0)}
}

// Open starts a window now: call it as the consumers start.
func (w *Window) Open() {
	w.until.Store(time.Now().Add(w.d).UnixNano())
	if w.nc != nil {
		w.reconnects.Store(w.nc.Stats().Reconnects)
	}
}

// Active reports whether a message arriving now may have been stored
// already; a reconnect since the last call opens a new window.
func (w *Window) Active() bool {
	now := time.Now()
	if w.nc != nil {
		if n := w.nc.Stats().Reconnects; n != w.reconnects.Load() {
			w.reconnects.Store(n)
			w.until.Store(now.Add(w.d).UnixNano())
		}
	}
	return now.UnixNano() < w.until.Load()
}
