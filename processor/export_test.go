package processor

// What the external tests (package processor_test, which may import the
// detectors) read of the package's internals.

// Snake is snake.
var Snake = snake

// PortLocals is how many detectors keep state on p.
func PortLocals(p *PortState) int { return len(p.locals) }
