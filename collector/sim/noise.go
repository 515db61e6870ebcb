package sim

import (
	"math/rand/v2"
	"time"
)

// noisePlan is where and when the noise of a run happens, drawn once from the
// seed. Keys are tick*ports+port (or tick*nodes+node for node events).
type noisePlan struct {
	ports, nodes int
	resets       map[int]bool
	restarts     map[int]bool
	portGaps     map[int]bool
	nodeGaps     map[int]bool
	duplicates   map[int]bool
	glitches     map[int]int // -> which of the port's counters to drop
	nearWrap     map[int]bool
}

// NoiseEvent is a piece of noise that was placed, for tests and summaries.
type NoiseEvent struct {
	Kind string // "reset", "collector_restart", "port_gap", "node_gap", "duplicate", "glitch", "near_wrap"
	Node string
	Port PortRef // zero for node events
	Tick int
	At   time.Time
}

func newNoisePlan(c *Config, l *Layout, faulty map[PortRef]bool) (*noisePlan, []NoiseEvent) {
	rng := rand.New(rand.NewPCG(c.Seed, 0x9015e))
	ticks := c.Ticks()
	np := &noisePlan{
		ports: len(l.Ports), nodes: len(l.Nodes),
		resets: map[int]bool{}, restarts: map[int]bool{}, portGaps: map[int]bool{},
		nodeGaps: map[int]bool{}, duplicates: map[int]bool{}, glitches: map[int]int{}, nearWrap: map[int]bool{},
	}
	var events []NoiseEvent
	// Noise stays away from the ports a fault acts on, and from their nodes
	// for node-wide noise, so every label stays visible in the trace.
	var freePorts, freeNodes []int
	faultyNode := map[string]bool{}
	for i, p := range l.Ports {
		if faulty[p.PortRef] {
			faultyNode[p.Node] = true
		} else {
			freePorts = append(freePorts, i)
		}
	}
	for i, n := range l.Nodes {
		if !faultyNode[n] {
			freeNodes = append(freeNodes, i)
		}
	}
	// Avoid the first and last two ticks: a trace should open and close clean.
	lo, hi := min(2, ticks-1), max(min(2, ticks-1)+1, ticks-2)
	tickAt := func() int { return lo + rng.IntN(hi-lo) }
	at := func(k int) time.Time { return l.Start.Add(time.Duration(k) * c.Interval) }
	portEvent := func(kind string, set map[int]bool) (int, int, bool) {
		if len(freePorts) == 0 {
			return 0, 0, false
		}
		pi, k := freePorts[rng.IntN(len(freePorts))], tickAt()
		if set != nil {
			set[k*np.ports+pi] = true
		}
		events = append(events, NoiseEvent{Kind: kind, Node: l.Ports[pi].Node, Port: l.Ports[pi].PortRef, Tick: k, At: at(k)})
		return pi, k, true
	}
	for range c.Noise.Resets {
		portEvent("reset", np.resets)
	}
	for range c.Noise.Duplicates {
		portEvent("duplicate", np.duplicates)
	}
	for range c.Noise.Glitches {
		if pi, k, ok := portEvent("glitch", nil); ok {
			np.glitches[k*np.ports+pi] = rng.IntN(len(newPortState(l.Ports[pi]).values))
		}
	}
	for range c.Noise.PortGaps {
		if pi, k, ok := portEvent("port_gap", nil); ok {
			for n := range 1 + rng.IntN(c.Noise.GapIntervals) {
				np.portGaps[(k+n)*np.ports+pi] = true
			}
		}
	}
	var roce []int
	for _, pi := range freePorts {
		if l.Ports[pi].LinkLayer == LinkLayerEthernet {
			roce = append(roce, pi)
		}
	}
	for range c.Noise.NearWrap {
		if len(roce) > 0 {
			pi := roce[rng.IntN(len(roce))]
			np.nearWrap[pi] = true
			events = append(events, NoiseEvent{Kind: "near_wrap", Node: l.Ports[pi].Node, Port: l.Ports[pi].PortRef, At: l.Start})
		}
	}
	// Node gaps and restarts go to different nodes: a restart must show.
	rng.Shuffle(len(freeNodes), func(i, j int) { freeNodes[i], freeNodes[j] = freeNodes[j], freeNodes[i] })
	for i := range c.Noise.NodeGaps {
		if len(freeNodes) == 0 {
			break
		}
		ni, k := freeNodes[i%len(freeNodes)], tickAt()
		for n := range 1 + rng.IntN(c.Noise.GapIntervals) {
			np.nodeGaps[(k+n)*np.nodes+ni] = true
		}
		events = append(events, NoiseEvent{Kind: "node_gap", Node: l.Nodes[ni], Tick: k, At: at(k)})
	}
	for i := range c.Noise.CollectorRestarts {
		if len(freeNodes) == 0 {
			break
		}
		ni := freeNodes[len(freeNodes)-1-i%len(freeNodes)]
		k := tickAt()
		np.restarts[k*np.nodes+ni] = true
		events = append(events, NoiseEvent{Kind: "collector_restart", Node: l.Nodes[ni], Tick: k, At: at(k)})
	}
	return np, events
}
