package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// clearEnv unsets every RDMAWATCH_ variable for the test (the ClickHouse
// DSN of the test run among them): the default layer must see none.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, envPrefix) {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

// layerValue is a value of a flag as each layer gives it, and the flag's
// value once it is set.
type layerValue struct {
	file []string // the file's value: one scalar, or a list
	arg  string   // the environment's and the command line's form
	want string   // Value.String() once set
}

// customValues gives two values of each custom pflag.Value type in the
// tree. A flag of a type neither here nor in flagValues fails the test,
// so a new type comes with its values.
var customValues = map[string][2]layerValue{}

// flagValues are two valid values of f's type, the first unlike the
// default, the second unlike the first: each layer then shows over the one
// under it.
func flagValues(f *pflag.Flag) ([2]layerValue, error) {
	scalar := func(v string) layerValue { return layerValue{file: []string{v}, arg: v, want: v} }
	def := f.DefValue
	switch typ := f.Value.Type(); typ {
	case "string":
		return [2]layerValue{scalar("value-a-" + f.Name), scalar("value-b-" + f.Name)}, nil
	case "bool":
		d, err := strconv.ParseBool(def)
		if err != nil {
			return [2]layerValue{}, err
		}
		return [2]layerValue{scalar(strconv.FormatBool(!d)), scalar(strconv.FormatBool(d))}, nil
	case "int", "int8", "int16", "int32", "int64":
		d, err := strconv.ParseInt(def, 10, 64)
		if err != nil {
			return [2]layerValue{}, err
		}
		return [2]layerValue{scalar(strconv.FormatInt(d+3, 10)), scalar(strconv.FormatInt(d+5, 10))}, nil
	case "uint", "uint8", "uint16", "uint32", "uint64":
		d, err := strconv.ParseUint(def, 10, 64)
		if err != nil {
			return [2]layerValue{}, err
		}
		return [2]layerValue{scalar(strconv.FormatUint(d+3, 10)), scalar(strconv.FormatUint(d+5, 10))}, nil
	case "float32", "float64":
		d, err := strconv.ParseFloat(def, 64)
		if err != nil {
			return [2]layerValue{}, err
		}
		return [2]layerValue{scalar(strconv.FormatFloat(d+1.5, 'g', -1, 64)), scalar(strconv.FormatFloat(d+2.5, 'g', -1, 64))}, nil
	case "duration":
		d, err := time.ParseDuration(def)
		if err != nil {
			return [2]layerValue{}, err
		}
		return [2]layerValue{scalar((d + 3*time.Second).String()), scalar((d + 5*time.Second).String())}, nil
	case "stringSlice":
		// A list in the file, a comma list in the environment and on the
		// command line.
		return [2]layerValue{
			{file: []string{"a1", "a2"}, arg: "a1,a2", want: "[a1,a2]"},
			{file: []string{"b1", "b2"}, arg: "b1,b2", want: "[b1,b2]"},
		}, nil
	case "stringArray":
		// One item: a comma is part of an item of an array.
		return [2]layerValue{
			{file: []string{"a1"}, arg: "a1", want: "[a1]"},
			{file: []string{"b1"}, arg: "b1", want: "[b1]"},
		}, nil
	default:
		if v, ok := customValues[typ]; ok {
			return v, nil
		}
		return [2]layerValue{}, fmt.Errorf("no values for flag type %q: add them to flagValues or customValues", typ)
	}
}

// yamlValue writes a layer's value for the file.
func yamlValue(v layerValue, list bool) string {
	if !list {
		return strconv.Quote(v.file[0])
	}
	q := make([]string, len(v.file))
	for i, s := range v.file {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// configKey is one key of the configuration: a flag of a command (path
// nil: a global flag, at the file's top level).
type configKey struct {
	path []string
	flag string
}

func (k configKey) name() string {
	if len(k.path) == 0 {
		return "global/" + k.flag
	}
	return strings.Join(k.path, " ") + "/" + k.flag
}

// everyKey lists the flags of every command of newRoot(), the globals once.
func everyKey() []configKey {
	var keys []configKey
	root := newRoot()
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "config" {
			keys = append(keys, configKey{flag: f.Name})
		}
	})
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			p := append(append([]string(nil), path...), sub.Name())
			sub.LocalFlags().VisitAll(func(f *pflag.Flag) {
				if f.Name != "help" {
					keys = append(keys, configKey{path: p, flag: f.Name})
				}
			})
			walk(sub, p)
		}
	}
	walk(root, nil)
	return keys
}

// layered builds a fresh command tree and returns k's command and flag
// after the layering: args on the command line, the variables set by the
// caller, the file at path ("" none).
func layered(t *testing.T, k configKey, args []string, path string) *pflag.Flag {
	t.Helper()
	root := newRoot()
	root.SetErr(io.Discard)
	c := root
	if len(k.path) > 0 {
		var err error
		if c, _, err = root.Find(k.path); err != nil || c.Name() != k.path[len(k.path)-1] {
			t.Fatalf("find %v: %v", k.path, err)
		}
	}
	c.Flags().SetOutput(io.Discard) // the deprecation notice of --partitions
	if err := c.ParseFlags(args); err != nil {
		t.Fatalf("command line %v: %v", args, err)
	}
	if err := applyConfig(root, c, path); err != nil {
		t.Fatalf("applyConfig: %v", err)
	}
	f := c.Flags().Lookup(k.flag)
	if f == nil {
		t.Fatalf("no flag --%s", k.flag)
	}
	return f
}

// TestConfigPrecedenceEveryKey: for every flag of every command, the
// default holds with nothing set; the file (the command's section, or the
// top level for a global flag) beats the default; each of the flag's
// environment variables beats the file; the command line beats the
// environment. Through applyConfig on a fresh command tree each time.
func TestConfigPrecedenceEveryKey(t *testing.T) {
	clearEnv(t)
	keys := everyKey()
	for _, k := range keys {
		t.Run(k.name(), func(t *testing.T) {
			probe := layered(t, k, nil, "")
			vals, err := flagValues(probe)
			if err != nil {
				t.Fatalf("--%s: %v", k.flag, err)
			}
			a, b := vals[0], vals[1]
			_, list := probe.Value.(pflag.SliceValue)
			check := func(layer string, f *pflag.Flag, want string) {
				t.Helper()
				if got := f.Value.String(); got != want {
					t.Errorf("%s: --%s = %s, want %s", layer, k.flag, got, want)
				}
			}
			check("default", probe, probe.DefValue)
			if probe.Changed {
				t.Errorf("default: --%s counts as given", k.flag)
			}

			var body string
			if len(k.path) == 0 {
				body = fmt.Sprintf("%s: %s\n", k.flag, yamlValue(a, list))
			} else {
				body = fmt.Sprintf("%s:\n  %s: %s\n", strings.Join(k.path, " "), k.flag, yamlValue(a, list))
			}
			path := writeConfig(t, body)
			check("file over default", layered(t, k, nil, path), a.want)

			for _, env := range flagEnv(probe) {
				t.Setenv(env, b.arg)
				check(env+" over file", layered(t, k, nil, path), b.want)
				check("command line over "+env, layered(t, k, []string{"--" + k.flag + "=" + a.arg}, path), a.want)
				t.Setenv(env, "")
			}
		})
	}
	t.Logf("checked the precedence of %d keys", len(keys))
}

// TestConfigGlobalKeyInASection: a global flag in a command's section
// beats the top level, for that command only.
func TestConfigGlobalKeyInASection(t *testing.T) {
	clearEnv(t)
	path := writeConfig(t, "log-level: warn\ncollector:\n  log-level: debug\n")
	if f := layered(t, configKey{path: []string{"collector"}, flag: "log-level"}, nil, path); f.Value.String() != "debug" {
		t.Errorf("collector's log-level %s, want its section's debug", f.Value)
	}
	if f := layered(t, configKey{path: []string{"processor"}, flag: "log-level"}, nil, path); f.Value.String() != "warn" {
		t.Errorf("processor's log-level %s, want the top level's warn", f.Value)
	}
}

// TestEveryCommandSetsUp: every command that runs goes through setUp (no
// command sets a PreRun of its own that would replace it), so the
// environment and the file reach it and its options are checked.
func TestEveryCommandSetsUp(t *testing.T) {
	clearEnv(t)
	t.Setenv("RDMAWATCH_WAIT", "17s")
	// What the commands that need them are given, so their checks pass.
	t.Setenv("RDMAWATCH_CLICKHOUSE", "clickhouse://127.0.0.1:1/db")
	t.Setenv("RDMAWATCH_WEBHOOK", "hook=http://127.0.0.1:1/")
	args := map[string][]string{"config check": {writeConfig(t, "wait: 5s\n")}, "deadletter show": {"1"}}
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if c.Runnable() {
			paths = append(paths, path)
		}
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(newRoot(), nil)
	for _, p := range paths {
		name := strings.Join(p, " ")
		t.Run(name, func(t *testing.T) {
			g := &global{}
			root := newRootOf(g)
			c, _, err := root.Find(p)
			if err != nil {
				t.Fatal(err)
			}
			ran := false
			c.Run, c.RunE = nil, func(*cobra.Command, []string) error {
				ran = true
				return nil
			}
			root.SetArgs(append(append([]string(nil), p...), args[name]...))
			root.SetOut(io.Discard)
			if err := root.Execute(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !ran || g.wait != 17*time.Second || g.log == nil {
				t.Errorf("%s: ran %v, --wait %s, logger %v: setUp did not run before it", name, ran, g.wait, g.log != nil)
			}
		})
	}
	if len(paths) < 20 {
		t.Errorf("ran %d commands: want every one", len(paths))
	}
}

// TestClusterEnvAlias: --cluster reads RDMAWATCH_CLUSTER, and the name the
// deployments set before it, RDMAWATCH_CLICKHOUSE_CLUSTER.
func TestClusterEnvAlias(t *testing.T) {
	for _, cmd := range []string{"sink", "migrate"} {
		for _, tc := range []struct{ cluster, clickhouseCluster, want string }{
			{"", "", ""},
			{"", "old", "old"},
			{"new", "", "new"},
			{"new", "old", "new"},
		} {
			clearEnv(t)
			t.Setenv("RDMAWATCH_CLUSTER", tc.cluster)
			t.Setenv("RDMAWATCH_CLICKHOUSE_CLUSTER", tc.clickhouseCluster)
			f := layered(t, configKey{path: []string{cmd}, flag: "cluster"}, nil, "")
			if got := f.Value.String(); got != tc.want {
				t.Errorf("%s with RDMAWATCH_CLUSTER=%q RDMAWATCH_CLICKHOUSE_CLUSTER=%q: --cluster %q, want %q", cmd, tc.cluster, tc.clickhouseCluster, got, tc.want)
			}
		}
	}
}

// TestCollectorNodeStaysOffFilters: RDMAWATCH_NODE, set for the collector
// on every host, sets the collector's --node and no command's --node
// filter (a query run on that host would show one node silently).
func TestCollectorNodeStaysOffFilters(t *testing.T) {
	clearEnv(t)
	t.Setenv("RDMAWATCH_NODE", "gpu-007")
	for _, tc := range []struct {
		path []string
		want string
	}{
		{[]string{"collector"}, "gpu-007"},
		{[]string{"query"}, ""},
		{[]string{"postmortem"}, ""},
		{[]string{"events", "tail"}, "[]"},
	} {
		f := layered(t, configKey{path: tc.path, flag: "node"}, nil, "")
		if got := f.Value.String(); got != tc.want {
			t.Errorf("%s --node %q with RDMAWATCH_NODE=gpu-007, want %q", strings.Join(tc.path, " "), got, tc.want)
		}
	}
}
