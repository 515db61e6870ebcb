package cnp

import (
	"testing"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// TestNoteInterval: the fabric's slowest sampling interval survives a
// fleet of faster ports reading in between, is forgotten after
// slowestHold of data time, and ignores gaps.
func TestNoteInterval(t *testing.T) {
	const s = schemas.Millis(1000)
	var f fabricState
	f.noteInterval(30*s, 0)
	// 3000 readings of 10 s ports between two of the 30 s port's.
	for i := range 3000 {
		f.noteInterval(10*s, schemas.Millis(i)*10)
	}
	if f.slowestMs != 30*s {
		t.Errorf("slowest %v after fast ports read, want 30 s", f.slowestMs)
	}
	f.noteInterval(5*60*s, 40*s) // a port silent five minutes: a gap
	if f.slowestMs != 30*s {
		t.Errorf("slowest %v after a gap, want 30 s", f.slowestMs)
	}
	f.noteInterval(10*s, 11*60*s) // no 30 s port for over ten minutes
	if f.slowestMs != 10*s {
		t.Errorf("slowest %v, want 10 s once the 30 s ports are gone", f.slowestMs)
	}
}
