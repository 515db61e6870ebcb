// Package all links every detector into a program. A detector registers
// itself with processor.Register in its package's init(), so the registry
// (processor.NewDetectors, processor.Registered) holds the detectors whose
// packages the program imports: every program and test that builds a
// processor from the registry, validates detector settings or lists the
// detectors imports this package for its side effect:
//
//	import _ "github.com/rdmawatch/rdmawatch/processor/detect/all"
//
// A new detector adds its package here.
package all

import (
	_ "github.com/rdmawatch/rdmawatch/processor/detect/berdrift"
	_ "github.com/rdmawatch/rdmawatch/processor/detect/cnp"
	_ "github.com/rdmawatch/rdmawatch/processor/detect/completionerrors"
	_ "github.com/rdmawatch/rdmawatch/processor/detect/configmismatch"
	_ "github.com/rdmawatch/rdmawatch/processor/detect/countersaturated"
	_ "github.com/rdmawatch/rdmawatch/processor/detect/linkflap"
	_ "github.com/rdmawatch/rdmawatch/processor/detect/pfcstorm"
	_ "github.com/rdmawatch/rdmawatch/processor/detect/receivestarvation"
	_ "github.com/rdmawatch/rdmawatch/processor/detect/retransmissions"
)
