package main

// The one-line terminal form of an event, for `events tail` and the live
// output of `run`.

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// formatEvent is the one-line terminal form of an event.
func formatEvent(ev *schemas.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-8s %-18s %-8s %-24s %s", ev.DetectedAt, strings.ToUpper(ev.State), ev.Type, ev.Severity, ev.Subject, ev.Summary)
	if ev.End != nil && ev.State == schemas.StateResolved {
		fmt.Fprintf(&b, " (lasted %s)", ev.End.Time().Sub(ev.Start.Time()))
	}
	return b.String()
}

// keyEvidence are the figures worth a glance per event type, most telling
// first; other types show their first numeric figures by name.
var keyEvidence = map[string][]string{
	schemas.TypePFCStorm:         {"tx_pause_fraction", "tx_pause_frames_per_s", "affected_ports", "rcv_gbps", "tx_pause_storm_error_events"},
	schemas.TypeBERDrift:         {"current_ber", "baseline_ber", "minutes_to_critical", "slope_decades_per_h", "critical_crossed"},
	schemas.TypeCNPECNImbalance:  {"marked_per_s", "cnp_sent_per_s", "cnp_ignored_per_s", "ratio", "gap_fraction", "fabric_cnp_sent", "fabric_cnp_handled"},
	schemas.TypeLinkFlap:         {"downs", "state", "last_down_at"},
	schemas.TypeCounterSaturated: {"saturated", "values", "state"},
}

// formatEvidence is a compact one-line rendering of an event's key
// evidence: at most four figures, plus where a PFC storm reached.
func formatEvidence(ev *schemas.Event) string {
	const maxFigures = 4
	var parts []string
	seen := map[string]bool{}
	for _, k := range keyEvidence[ev.Type] {
		if len(parts) == maxFigures {
			break
		}
		if v, ok := ev.Evidence[k]; ok {
			parts = append(parts, k+"="+formatFigure(v))
			seen[k] = true
		}
	}
	if len(parts) < maxFigures {
		keys := make([]string, 0, len(ev.Evidence))
		for k, v := range ev.Evidence {
			if !seen[k] && isNumber(v) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys[:min(len(keys), maxFigures-len(parts))] {
			parts = append(parts, k+"="+formatFigure(ev.Evidence[k]))
		}
	}
	if len(ev.Affected) > 0 {
		nodes := make([]string, 0, len(ev.Affected))
		for _, a := range ev.Affected {
			nodes = append(nodes, fmt.Sprintf("%s/%s/%d(%d hop)", a.Node, a.Device, a.Port, a.Hops))
		}
		if len(nodes) > 4 {
			nodes = append(nodes[:4], fmt.Sprintf("+%d", len(nodes)-4))
		}
		parts = append(parts, "affected="+strings.Join(nodes, ","))
	}
	if len(parts) == 0 {
		return ""
	}
	return "evidence: " + strings.Join(parts, " ")
}

func isNumber(v any) bool {
	switch v.(type) {
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return true
	}
	return false
}

func formatFigure(v any) string {
	switch x := v.(type) {
	case float64:
		return formatFloat(x)
	case float32:
		return formatFloat(float64(x))
	case []any:
		s := make([]string, len(x))
		for i, e := range x {
			s[i] = formatFigure(e)
		}
		return strings.Join(s, ",")
	case []string:
		return strings.Join(x, ",")
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		s := make([]string, len(keys))
		for i, k := range keys {
			s[i] = k + ":" + formatFigure(x[k])
		}
		return "{" + strings.Join(s, ",") + "}"
	}
	return fmt.Sprint(v)
}

func formatFloat(x float64) string {
	if x == math.Trunc(x) && math.Abs(x) < 1e9 {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.3g", x)
}
