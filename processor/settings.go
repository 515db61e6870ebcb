package processor

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// ErrUnknownSetting is returned for a detector setting no detector has.
var ErrUnknownSetting = errors.New("unknown detector setting")

// Settings are detector tunables from a configuration file: detector name ->
// setting -> value as text. A setting is the snake_case name of one of the
// detector's exported fields (StableAfter: stable_after): the detector
// structs are the one place the tunables and their defaults are written.
type Settings map[string]map[string]string

// Apply sets the settings on the detectors with those names. A detector or
// setting nobody has, or a value that does not parse, is an error naming it.
func (s Settings) Apply(dets []Detector) error {
	byName := map[string]Detector{}
	for _, d := range dets {
		byName[d.Name()] = d
	}
	var errs []error
	for _, name := range sortedKeys(s) {
		d, ok := byName[name]
		if !ok {
			errs = append(errs, fmt.Errorf("%w: detector %q (detectors: %s)", ErrUnknownDetector, name, strings.Join(Registered(), ", ")))
			continue
		}
		fields := tunableFields(d)
		for _, key := range sortedKeys(s[name]) {
			f, ok := fields[key]
			if !ok {
				errs = append(errs, fmt.Errorf("%w: %s.%s (settings: %s)", ErrUnknownSetting, name, key, strings.Join(sortedKeys(fields), ", ")))
				continue
			}
			if err := setValue(f, s[name][key]); err != nil {
				errs = append(errs, fmt.Errorf("%s.%s: %w", name, key, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Tunables lists a detector's settings and their current values, by name.
func Tunables(d Detector) map[string]string {
	out := map[string]string{}
	for k, v := range tunableFields(d) {
		switch x := v.Interface().(type) {
		case time.Duration:
			out[k] = x.String()
		default:
			out[k] = fmt.Sprint(x)
		}
	}
	return out
}

// tunableFields are the exported fields of kinds a file can set.
func tunableFields(d Detector) map[string]reflect.Value {
	out := map[string]reflect.Value{}
	v := reflect.ValueOf(Unwrap(d)) // NewDetectors wraps them for cause linking
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return out
	}
	addFields(out, v.Elem())
	return out
}

// addFields adds v's settable fields, and those of the exported structs it
// embeds (JudgedTunables), by setting name.
func addFields(out map[string]reflect.Value, v reflect.Value) {
	for i := 0; i < v.NumField(); i++ {
		sf := v.Type().Field(i)
		if !sf.IsExported() {
			continue
		}
		if sf.Anonymous && sf.Type.Kind() == reflect.Struct {
			addFields(out, v.Field(i))
			continue
		}
		switch sf.Type.Kind() {
		case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Uint32, reflect.Int32, reflect.Float64, reflect.Bool, reflect.String:
			out[snake(sf.Name)] = v.Field(i)
		}
	}
}

func setValue(f reflect.Value, s string) error {
	s = strings.TrimSpace(s)
	if f.Type() == reflect.TypeOf(time.Duration(0)) {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return fmt.Errorf("%q: want a duration such as 90s or 5m", s)
		}
		f.SetInt(int64(d))
		return nil
	}
	switch f.Kind() {
	case reflect.Int, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || f.OverflowInt(n) {
			return fmt.Errorf("%q: want an integer", s)
		}
		f.SetInt(n)
	case reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || f.OverflowUint(n) {
			return fmt.Errorf("%q: want a non-negative integer", s)
		}
		f.SetUint(n)
	case reflect.Float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			// NaN compares false with everything and Inf with nearly
			// everything: a threshold set to either silently turns its
			// detector off or on for good.
			return fmt.Errorf("%q: want a finite number", s)
		}
		f.SetFloat(x)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q: want true or false", s)
		}
		f.SetBool(b)
	case reflect.String:
		f.SetString(s)
	}
	return nil
}

// snake turns a Go field name into a setting name: StableAfter ->
// stable_after, CNPLossNoise -> cnp_loss_noise.
func snake(name string) string {
	var b strings.Builder
	rs := []rune(name)
	for i, r := range rs {
		if unicode.IsUpper(r) && i > 0 && (unicode.IsLower(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
