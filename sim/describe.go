package sim

import (
	"bytes"
	"fmt"
	"time"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// ParsedTopology is the fleet's topology read back through the format v1
// parser, so a processor sees exactly what a file would give it.
func ParsedTopology(cfg Config) (*schemas.Topology, error) {
	var b bytes.Buffer
	if err := WriteTopology(cfg, &b); err != nil {
		return nil, err
	}
	topo, err := schemas.ParseTopology(&b)
	if err != nil {
		return nil, fmt.Errorf("the simulated fleet's topology: %w", err)
	}
	return topo, nil
}

// DescribeFault is a one-line description of a fault for a terminal; times
// are offsets from base, or absolute when base is zero.
func DescribeFault(f Fault, base time.Time) string {
	at := func(t time.Time) string {
		if base.IsZero() {
			return t.UTC().Format(time.RFC3339)
		}
		return "+" + t.Sub(base).Round(time.Second).String()
	}
	switch v := f.(type) {
	case PFCStorm:
		silent := ""
		if v.Silent {
			silent = " (host hung, its collector silent)"
		}
		return fmt.Sprintf("pfc_storm          %s at %s for %s%s", v.Port, at(v.From), v.Duration, silent)
	case BERDrift:
		until := ""
		if !v.Until.IsZero() {
			until = ", optic replaced at " + at(v.Until)
		}
		return fmt.Sprintf("ber_drift          %s from %s, critical BER %s later%s", v.Port, at(v.From), v.ToCritical, until)
	case CNPECNImbalance:
		return fmt.Sprintf("cnp_ecn_imbalance  %s %s at %s for %s", v.Kind, v.Port, at(v.From), v.Duration)
	case LinkFlap:
		return fmt.Sprintf("link_flap          %s at %s", v.Port, at(v.At))
	case CounterSaturated:
		return fmt.Sprintf("counter_saturated  %s %s from %s", v.Port, v.Counter, at(v.From))
	case ReceiveStarvation:
		storm := ""
		if v.StormAfter > 0 {
			storm = fmt.Sprintf(", its PFC storm %s later", v.StormAfter)
		}
		via := ""
		switch v.Via {
		case StarveRNR:
			via = fmt.Sprintf(" (RNR NAKs to %d senders)", len(v.Senders))
		case StarveDiscards:
			via = " (rx_discards_phy: the host does not drain the NIC)"
		}
		return fmt.Sprintf("receive_starvation %s at %s for %s%s%s", v.Port, at(v.From), v.Duration, via, storm)
	case Incast:
		return fmt.Sprintf("incast (not a fault: congestion that must raise nothing) into %s from %d senders from %s", v.Receiver, len(v.Senders), at(v.From))
	}
	return fmt.Sprintf("%T", f)
}
