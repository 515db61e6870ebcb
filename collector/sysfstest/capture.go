package sysfstest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// FromCapture reads a sysfs capture (test/fixtures/mlx-sysfs-capture.txt)
// into a spec.
func FromCapture(path string) (Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return Spec{}, fmt.Errorf("sysfstest: %w", err)
	}
	defer f.Close()
	spec, err := ParseCapture(f)
	if err != nil {
		return Spec{}, fmt.Errorf("sysfstest: %s: %w", path, err)
	}
	return spec, nil
}

// ParseCapture reads a capture: one line per file below
// /sys/class/infiniband/, "path = content"; '#' starts a comment line.
// Devices and ports keep the order of their first line.
func ParseCapture(r io.Reader) (Spec, error) {
	var spec Spec
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line, err := ParseCaptureLine(sc.Text())
		if err != nil {
			return Spec{}, fmt.Errorf("line %d: %w", n, err)
		}
		if line.Device == "" {
			continue
		}
		spec.add(line)
	}
	if err := sc.Err(); err != nil {
		return Spec{}, fmt.Errorf("line %d: %w", n+1, err)
	}
	return spec, nil
}

// CaptureLine is one parsed capture line. A blank or comment line gives a
// zero CaptureLine.
type CaptureLine struct {
	Device string
	Port   int // 0 for a device file
	Set    Set // "" for a file directly below the device or the port
	// Name is the file name; for gid_attrs/ndevs/<i> it is
	// "gid_attrs/ndevs/<i>".
	Name  string
	Value string
}

// ParseCaptureLine parses "mlx5_0/ports/1/counters/symbol_error = 0".
//
// Some captures escaped the file's trailing newline as a literal `\n`
// ("InfiniBand\n"); those escapes are dropped from the end of the value, as
// the newline ends every sysfs attribute anyway.
func ParseCaptureLine(s string) (CaptureLine, error) {
	t := strings.TrimSpace(s)
	if t == "" || strings.HasPrefix(t, "#") {
		return CaptureLine{}, nil
	}
	path, value, ok := strings.Cut(t, " = ")
	if !ok {
		// "path =" with an empty value: the file exists but is empty.
		if p, found := strings.CutSuffix(t, " ="); found {
			path, value, ok = p, "", true
		}
	}
	if !ok {
		return CaptureLine{}, fmt.Errorf("%q is not \"path = content\"", s)
	}
	path = strings.TrimSpace(path)
	value = strings.TrimSpace(value)
	for {
		v, cut := strings.CutSuffix(value, `\n`)
		if !cut {
			break
		}
		value = strings.TrimSpace(v)
	}

	parts := strings.Split(path, "/")
	for _, p := range parts {
		if err := checkName(p); err != nil {
			return CaptureLine{}, fmt.Errorf("path %q: %w", path, err)
		}
	}
	l := CaptureLine{Device: parts[0], Value: value}
	switch {
	case len(parts) == 2 && parts[1] != "ports":
		l.Name = parts[1]
		return l, nil
	case len(parts) >= 4 && parts[1] == "ports":
		port, err := strconv.Atoi(parts[2])
		if err != nil || port < 1 {
			return CaptureLine{}, fmt.Errorf("path %q: port %q is not a number from 1", path, parts[2])
		}
		l.Port = port
		rest := parts[3:]
		switch {
		case len(rest) == 1 && rest[0] != string(Counters) && rest[0] != string(HWCounters) && rest[0] != "gid_attrs":
			l.Name = rest[0]
			return l, nil
		case len(rest) == 2 && (rest[0] == string(Counters) || rest[0] == string(HWCounters)):
			l.Set, l.Name = Set(rest[0]), rest[1]
			return l, nil
		case len(rest) == 3 && rest[0] == "gid_attrs" && rest[1] == "ndevs":
			i, err := strconv.Atoi(rest[2])
			if err != nil || i < 0 || i > 255 {
				return CaptureLine{}, fmt.Errorf("path %q: GID index %q is not 0..255", path, rest[2])
			}
			l.Name = "gid_attrs/ndevs/" + rest[2]
			return l, nil
		}
	}
	return CaptureLine{}, fmt.Errorf("path %q is not <dev>/<file>, <dev>/ports/<p>/<file>, <dev>/ports/<p>/{counters,hw_counters}/<name> or <dev>/ports/<p>/gid_attrs/ndevs/<i>", path)
}

func (s *Spec) add(l CaptureLine) {
	d := s.Device(l.Device)
	if d == nil {
		s.Devices = append(s.Devices, Device{Name: l.Device})
		d = &s.Devices[len(s.Devices)-1]
	}
	if l.Port == 0 {
		d.Files = setKey(d.Files, l.Name, l.Value)
		return
	}
	p := d.Port(l.Port)
	if p == nil {
		d.Ports = append(d.Ports, Port{Num: l.Port})
		p = &d.Ports[len(d.Ports)-1]
	}
	switch {
	case l.Set == Counters:
		p.Counters = setKey(p.Counters, l.Name, l.Value)
	case l.Set == HWCounters:
		p.HWCounters = setKey(p.HWCounters, l.Name, l.Value)
	case strings.HasPrefix(l.Name, "gid_attrs/ndevs/"):
		i, _ := strconv.Atoi(strings.TrimPrefix(l.Name, "gid_attrs/ndevs/"))
		for len(p.Netdevs) <= i {
			p.Netdevs = append(p.Netdevs, "")
		}
		p.Netdevs[i] = l.Value
	default:
		p.Files = setKey(p.Files, l.Name, l.Value)
	}
}

func setKey(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = make(map[string]string)
	}
	m[k] = v
	return m
}
