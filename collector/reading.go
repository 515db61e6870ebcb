package collector

import (
	"context"
	"github.com/rdmawatch/rdmawatch/schemas"
	"time"
)

// PortReading is one port's raw cumulative counters as read from the host.
// A counter that could not be read is absent from its map: absent is not zero.
type PortReading struct {
	Device    string
	Port      int
	Netdev    string
	LinkLayer string // "Ethernet" (RoCE) or "InfiniBand"
	State     string // sysfs state text without the number, e.g. "ACTIVE"
	Rate      string // sysfs rate text, e.g. "200 Gb/sec (4X HDR)"
	// Time is when this port was read (data time).
	Time       time.Time
	Counters   map[string]uint64 // ports/<p>/counters
	HWCounters map[string]uint64 // ports/<p>/hw_counters
	Ethtool    map[string]uint64 // ethtool -S <netdev>, names trimmed
	// Ifindex is the netdev's ifindex when it was read (0: unknown, as in
	// traces); LowerIfindex those of a bond's members, in member order.
	// A change tells the delta engine the port restarted.
	Ifindex      int
	LowerIfindex []int
	// Config is what this reading learnt of the port's settings; nil when
	// it read none. Fields it does not know are nil and keep the value
	// known before (a trace may carry only what changed).
	Config *schemas.PortConfig

	// members are a LAG port's member netdevs as read this scrape (host
	// source only); lagMember marks the port sample of one member.
	members   []string
	lagMember bool
}

// Reading is one scrape of one node.
type Reading struct {
	Node string
	Time time.Time
	// Restart says the node's collector restarted before this reading and lost
	// its previous readings: every port starts from a new baseline.
	Restart bool
	Ports   []PortReading
	// Device facts for the inventory (fw_ver, board_id, hca_type, node_guid),
	// keyed by device; optional.
	Devices map[string]DeviceInfo
}

// DeviceInfo is what sysfs says about an RDMA device.
type DeviceInfo struct {
	FWVersion string
	BoardID   string
	HCAType   string
	NodeGUID  string
}

// Source yields readings. A live host source reads the host when asked; the
// collector's loop paces it. A trace source returns readings as fast as it
// can parse them and io.EOF at the end.
type Source interface {
	Next(ctx context.Context) (*Reading, error)
}
