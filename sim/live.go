package sim

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrInvalidFault wraps every error of a fault spec or of a fault injected
// into a running fleet.
var ErrInvalidFault = errors.New("invalid fault")

// Now is the data time of the next reading round: a fault injected now
// starts affecting readings from this round on.
func (f *Fleet) Now() time.Time {
	return f.layout.Start.Add(time.Duration(f.tick) * f.cfg.Interval)
}

// Inject adds a fault to a running fleet (faults on demand). The fault takes
// effect from the next Step; it must start at or after Now and before the
// fleet's end. FabricCNPLoss cannot be injected: it takes over the CNP
// accounting of the whole fabric from the first round, so it belongs in
// Config.Faults. Noise is planned at NewFleet, so an injected fault's ports
// may carry noise the fault would otherwise have kept off them.
func (f *Fleet) Inject(fault Fault) error {
	if fault == nil {
		return fmt.Errorf("%w: nil fault", ErrInvalidFault)
	}
	if c, ok := fault.(CNPECNImbalance); ok && c.Kind == FabricCNPLoss {
		return fmt.Errorf("%w: fabric CNP loss cannot be injected into a running fleet; put it in the config", ErrInvalidFault)
	}
	if from := faultStart(fault); !from.IsZero() && from.Before(f.Now()) {
		return fmt.Errorf("%w: starts at %s, before the fleet's data time %s", ErrInvalidFault,
			from.UTC().Format(time.RFC3339), f.Now().UTC().Format(time.RFC3339))
	}
	e, err := fault.Start(f.layout)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidFault, err)
	}
	f.effects = append(f.effects, e)
	for _, r := range e.Ports() {
		pi, ok := f.layout.byRef[r]
		if !ok {
			continue
		}
		p := &f.ports[pi]
		// The fabric's CNP balance hands out CNPs after every fault has had
		// its say, as it does for the faults NewFleet starts.
		at := len(p.effects)
		for i, pe := range p.effects {
			if _, ok := pe.(*cnpLoss); ok {
				at = i
				break
			}
		}
		p.effects = append(p.effects[:at], append([]Effect{e}, p.effects[at:]...)...)
	}
	return nil
}

// faultStart is when a fault begins, for the faults that say so.
func faultStart(f Fault) time.Time {
	switch v := f.(type) {
	case LinkFlap:
		return v.At
	case PFCStorm:
		return v.From
	case BERDrift:
		return v.From
	case CNPECNImbalance:
		return v.From
	case CounterSaturated:
		return v.From
	case Incast:
		return v.From
	case ReceiveStarvation:
		return v.From
	}
	return time.Time{}
}

// FaultKinds are the fault names ParseFault knows, with what the optional
// duration means for each.
var FaultKinds = map[string]string{
	"link_flap":                "link down time (default 3s)",
	"pfc_storm":                "storm length (default 3m)",
	"pfc_storm_silent":         "storm length of a hung host whose collector stops (default 3m)",
	"ber_drift":                "time until the link's BER crosses the critical level (default 40m)",
	"cnp_np_disabled":          "how long the notification point sends no CNPs (default 8m)",
	"cnp_rp_ignoring":          "how long the reaction point ignores CNPs (default 6m)",
	"counter_saturated":        "(ignored) symbol_error climbs to 65535 and pins",
	"receive_starvation_storm": "starvation length (default 6m); its port's PFC storm starts 90s in",
	"config_mtu":               "how long the port's MTU is 1500 (default 10m; the fleet must report its config)",
	"config_pfc_off":           "how long PFC is off on the lossless priority (default 10m)",
	"config_ecn_np_off":        "how long the ECN notification point is off by configuration (default 10m)",
	"config_ecn_rp_off":        "how long the ECN reaction point is off by configuration (default 10m)",
}

// configKinds maps the config_* fault names to the setting they change.
var configKinds = map[string]MisconfigKind{
	"config_mtu": MisconfigMTU, "config_pfc_off": MisconfigPFCOff,
	"config_ecn_np_off": MisconfigNPOff, "config_ecn_rp_off": MisconfigRPOff,
}

// ParseFault reads a fault spec: KIND@WHEN[,DURATION]:NODE/DEVICE/PORT, for
// example pfc_storm@+2m:gpu-007/mlx5_0/1 or ber_drift@+10m,30m:gpu-003/mlx5_1/1.
// WHEN is an offset from base (+2m) or an RFC 3339 time; KIND is one of
// FaultKinds.
func ParseFault(spec string, base time.Time) (Fault, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %q: "+format, append([]any{ErrInvalidFault, spec}, args...)...)
	}
	kind, rest, ok := strings.Cut(strings.TrimSpace(spec), "@")
	if !ok {
		return nil, bad("want KIND@WHEN[,DURATION]:NODE/DEVICE/PORT")
	}
	when, portText, ok := strings.Cut(rest, ":")
	if !ok {
		return nil, bad("no port: want KIND@WHEN[,DURATION]:NODE/DEVICE/PORT")
	}
	whenText, durText, _ := strings.Cut(when, ",")
	var at time.Time
	if strings.HasPrefix(whenText, "+") {
		d, err := time.ParseDuration(whenText[1:])
		if err != nil || d < 0 {
			return nil, bad("offset %q: want +DURATION such as +2m", whenText)
		}
		at = base.Add(d)
	} else {
		t, err := time.Parse(time.RFC3339Nano, whenText)
		if err != nil {
			return nil, bad("when %q: want +DURATION or an RFC 3339 time", whenText)
		}
		at = t
	}
	var dur time.Duration
	if durText != "" {
		d, err := time.ParseDuration(durText)
		if err != nil || d <= 0 {
			return nil, bad("duration %q: want a positive duration such as 3m", durText)
		}
		dur = d
	}
	port, err := ParsePortRef(portText)
	if err != nil {
		return nil, bad("%v", err)
	}
	or := func(d, def time.Duration) time.Duration {
		if d == 0 {
			return def
		}
		return d
	}
	switch kind {
	case "link_flap":
		return LinkFlap{Port: port, At: at, Down: dur}, nil
	case "pfc_storm", "pfc_storm_silent":
		return PFCStorm{Port: port, From: at, Duration: or(dur, 3*time.Minute), Spread: 300 * time.Millisecond,
			MaxAffected: 3, Remote: 1, Silent: kind == "pfc_storm_silent"}, nil
	case "ber_drift":
		return BERDrift{Port: port, From: at, ToCritical: or(dur, 40*time.Minute), Lane: 1, Noise: 0.25}, nil
	case "cnp_np_disabled":
		return CNPECNImbalance{Kind: NPDisabled, Port: port, From: at, Duration: or(dur, 8*time.Minute), MarkedPerSecond: 3000}, nil
	case "cnp_rp_ignoring":
		return CNPECNImbalance{Kind: RPIgnoring, Port: port, From: at, Duration: or(dur, 6*time.Minute)}, nil
	case "receive_starvation_storm":
		return ReceiveStarvation{Port: port, From: at, Duration: or(dur, 6*time.Minute), StormAfter: 90 * time.Second,
			Spread: 300 * time.Millisecond, MaxAffected: 3, Remote: 1}, nil
	case "counter_saturated":
		return CounterSaturated{Port: port, Counter: "symbol_error", From: at, Initial: 65000, PerSecond: 2}, nil
	}
	if k, ok := configKinds[kind]; ok {
		return Misconfig{Kind: k, Port: port, From: at, Duration: or(dur, 10*time.Minute)}, nil
	}
	return nil, bad("unknown kind %q (one of %s)", kind, strings.Join(slices.Sorted(maps.Keys(FaultKinds)), ", "))
}

// ParsePortRef reads node/device/port.
func ParsePortRef(s string) (PortRef, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return PortRef{}, fmt.Errorf("port %q: want NODE/DEVICE/PORT such as gpu-007/mlx5_0/1", s)
	}
	n, err := strconv.Atoi(parts[2])
	if err != nil || n < 1 {
		return PortRef{}, fmt.Errorf("port %q: the port number counts from 1", s)
	}
	return PortRef{Node: parts[0], Device: parts[1], Port: n}, nil
}
