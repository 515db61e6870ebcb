package processor

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// ErrUnknownDetector is returned for a detector name nobody registered.
var ErrUnknownDetector = errors.New("unknown detector")

// Factory makes a fresh detector instance with its defaults. Every processor
// calls it once, so detector-level state belongs to one processor.
type Factory func() Detector

var (
	registryMu sync.Mutex
	factories  = map[string]Factory{}
)

// Register adds a detector under name; detectors call it from their
// package's init(), one package per detector (processor/detect/...), and
// processor/detect/all imports them all. A second registration of a name
// is a programming error and panics at start, like http.Handle.
func Register(name string, f Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if name == "" || f == nil {
		panic("processor: Register with empty name or nil factory")
	}
	if _, dup := factories[name]; dup {
		panic("processor: detector " + name + " registered twice")
	}
	factories[name] = f
}

// Registered lists the registered detector names, sorted.
func Registered() []string {
	registryMu.Lock()
	defer registryMu.Unlock()
	names := make([]string, 0, len(factories))
	for n := range factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NewDetectors makes one instance of each named detector, or of every
// registered detector when names is empty, in name order: the order the
// runtime calls them in, so the event order is the same on every run. The
// instances come wrapped for cause linking (Link); Unwrap returns one.
func NewDetectors(names ...string) ([]Detector, error) {
	if len(names) == 0 {
		names = Registered()
		if len(names) == 0 {
			// The detectors register themselves from their packages'
			// init(): a program that imports none runs none, silently.
			return nil, errors.New("no detector registered: the program does not import processor/detect/all")
		}
	} else {
		names = append([]string(nil), names...)
		sort.Strings(names)
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]Detector, 0, len(names))
	for i, n := range names {
		if i > 0 && names[i-1] == n {
			continue
		}
		f, ok := factories[n]
		if !ok {
			return nil, fmt.Errorf("%w %q", ErrUnknownDetector, n)
		}
		out = append(out, f())
	}
	// The detectors of one processor share one book of incidents, through
	// which their events pass, so an incident can name its cause.
	return Link(out), nil
}
