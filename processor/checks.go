package processor

import (
	"fmt"
	"strings"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Next checks are commands an engineer pastes into a shell on a jump host:
// ssh to the node (or switch) with the command quoted, so pipes and greps run
// there. The note says what to look for. Commands name the port's own device,
// port and netdev, and the switch and switch port from the topology.

// ShellQuote quotes s for a POSIX shell.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// OnHost is a command to run on node.
func OnHost(node, command, note string) schemas.Check {
	return schemas.Check{Command: "ssh " + ShellQuote(node) + " " + ShellQuote(command), Note: note}
}

// NetdevOf is the port's netdev, or a shell expression that finds it on the
// host when the collector did not see one.
func NetdevOf(id schemas.PortID, netdev string) string {
	if netdev != "" {
		return netdev
	}
	return fmt.Sprintf("$(ibdev2netdev | awk '$1==\"%s\" && $3==\"%d\" {print $5}')", id.Device, id.Port)
}

// OnSwitch is the switch-side check of the port's link: the switch and its
// port from the topology (NVUE syntax, as on Cumulus leaves, whose ports the
// topology names swpN), or a note to find them when there is no topology.
func OnSwitch(fabric FabricView, id schemas.PortID, what string) schemas.Check {
	if fabric != nil {
		if topo := fabric.Topology(); topo != nil {
			if sw, swPort, ok := topo.AttachedSwitch(id); ok {
				return schemas.Check{
					Command: "ssh " + ShellQuote(sw) + " " + ShellQuote("nv show interface "+swPort+" counters"),
					Note:    fmt.Sprintf("switch side: %s of %s port %s", what, sw, swPort),
				}
			}
		}
	}
	return OnHost(id.Node, fmt.Sprintf("lldptool -t -n -i %s -V portDesc; lldptool -t -n -i %s -V sysName", NetdevOf(id, ""), NetdevOf(id, "")),
		"switch side: find the switch port this link is cabled to, then its "+what)
}

// InRdmawatch is a check answered by rdmawatch's own data.
func InRdmawatch(args, note string) schemas.Check {
	return schemas.Check{Command: "rdmawatch " + args, Note: note}
}

// PortName is how summaries name a port: node, device/port and, when the
// collector saw one, the netdev.
func PortName(id schemas.PortID, netdev string) string {
	if netdev != "" {
		return fmt.Sprintf("%s %s/%d (%s)", id.Node, id.Device, id.Port, netdev)
	}
	return fmt.Sprintf("%s %s/%d", id.Node, id.Device, id.Port)
}
