package processor

import (
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// The package's own tests build findings and events by hand; tests that
// drive detectors use processor/internal/detecttest (the same t0 and ports).

// t0 is the data time every test trace starts at.
var t0 = schemas.MillisOf(time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC))

func at(sec float64) schemas.Millis { return t0 + schemas.Millis(sec*1000) }

var (
	portA = schemas.PortID{Node: "host-a", Device: "mlx5_0", Port: 1}
	portB = schemas.PortID{Node: "host-b", Device: "mlx5_0", Port: 1}
)
