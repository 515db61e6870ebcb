package chdb

import (
	"context"
	"fmt"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// LoadTopology stores a topology (format v1) in topology_ports (which
// switch port each host port is cabled to) and topology_links (every cable),
// replacing what was loaded before for the same fabric. Each host port
// carries its node's rack (the optional "racks"; empty when none). It returns the
// number of host ports and links stored.
//
// In a database migrated in cluster mode (layout.go) the fabric's
// partition is dropped from every shard's *_local tables, and
// the rows go through the Distributed tables with insert_distributed_sync,
// so that when LoadTopology returns every shard has its rows and the
// per-leaf queries see the new fabric.
func LoadTopology(ctx context.Context, conn Conn, t *schemas.Topology) (ports, links int, err error) {
	fabric := t.Fabric
	now := time.Now().UTC().Truncate(time.Second)
	l, err := layoutOf(ctx, conn)
	if err != nil {
		return 0, 0, fmt.Errorf("topology %s: %w", fabric, err)
	}
	lit := "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(fabric) + "'"
	for _, table := range []string{"topology_ports", "topology_links"} {
		// Dropping a partition that does not exist is not an error.
		if err := conn.Exec(ctx, l.alter(table)+" DROP PARTITION "+lit); err != nil {
			return 0, 0, fmt.Errorf("topology %s: replace fabric %q in %s: %w", fabric, fabric, table, ddlHint(err))
		}
	}
	if l.cluster != "" {
		ctx = ch.Context(ctx, ch.WithSettings(ch.Settings{"insert_distributed_sync": 1}))
	}
	pb, err := conn.PrepareBatch(ctx, "INSERT INTO topology_ports (fabric, node, device, port, switch, switch_port, tier, rack, loaded_at)")
	if err != nil {
		return 0, 0, fmt.Errorf("topology %s: topology_ports: %w", fabric, err)
	}
	defer pb.Close()
	lb, err := conn.PrepareBatch(ctx, "INSERT INTO topology_links (fabric, a, b, a_tier, b_tier, loaded_at)")
	if err != nil {
		return 0, 0, fmt.Errorf("topology %s: topology_links: %w", fabric, err)
	}
	defer lb.Close()
	tierOf := func(e schemas.Endpoint) string {
		if e.IsHost() {
			return "host"
		}
		return t.Tier(e.Switch)
	}
	for i, l := range t.Links {
		a, errA := t.ParseEndpoint(l.A)
		b, errB := t.ParseEndpoint(l.B)
		if errA != nil || errB != nil {
			return 0, 0, fmt.Errorf("topology %s: link %d (%s - %s): %v", fabric, i+1, l.A, l.B, firstErr(errA, errB))
		}
		if err := lb.Append(fabric, a.String(), b.String(), tierOf(a), tierOf(b), now); err != nil {
			return 0, 0, fmt.Errorf("topology %s: link %d: %w", fabric, i+1, err)
		}
		links++
		for _, pair := range [][2]schemas.Endpoint{{a, b}, {b, a}} {
			host, sw := pair[0], pair[1]
			if !host.IsHost() || sw.IsHost() {
				continue
			}
			if err := pb.Append(fabric, host.Host.Node, host.Host.Device, uint16(min(max(host.Host.Port, 0), 65535)), sw.Switch, sw.SwitchPort, t.Tier(sw.Switch), t.Rack(host.Host.Node), now); err != nil {
				return 0, 0, fmt.Errorf("topology %s: port %s: %w", fabric, host, err)
			}
			ports++
		}
	}
	if err := pb.Send(); err != nil {
		return 0, 0, fmt.Errorf("topology %s: insert topology_ports: %w", fabric, err)
	}
	if err := lb.Send(); err != nil {
		return 0, 0, fmt.Errorf("topology %s: insert topology_links: %w", fabric, err)
	}
	return ports, links, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
