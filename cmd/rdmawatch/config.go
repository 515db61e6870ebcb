package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/rdmawatch/rdmawatch/internal/redact"
	"github.com/rdmawatch/rdmawatch/processor"
)

// Configuration comes from four places, the first that sets a flag wins:
// the command line, the environment (RDMAWATCH_<FLAG>, upper case, '-' as
// '_'), the --config file, the flag's default. applyConfig is the one path
// of the environment and of the file, for every flag of every command: no
// flag takes its default from the environment, so --help shows the built-in
// defaults and a variable cannot mean one thing to the default and another
// to applyConfig. --config itself comes from the command line, else
// RDMAWATCH_CONFIG (resolveConfigPath). After the layering each command's
// options are checked (global.validateCommand), and `config check FILE`
// runs the same checks on every section of FILE.
//
// The file is YAML: the global flags at the top level, each command's flags
// in a section named after the command (a subcommand's under "parent
// subcommand", e.g. "events tail"):
//
//	nats: nats://nats-1:4222
//	log-format: json
//	collector:
//	  interval: 5s
//	processor:
//	  topology: /etc/rdmawatch/topology.json
//
// A key that names no flag, or a value a flag refuses, is an error naming
// the file, line and key: a typo never silently leaves a default in place.
// The YAML library (go.yaml.in/yaml/v3) keeps each key's line, which is why
// the file is read with it rather than through a map.

// envPrefix prefixes every flag's environment variable.
const envPrefix = "RDMAWATCH_"

// envName is the environment variable of a flag.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// envAliasAnnotation holds the older names of a flag's variable, read
// after RDMAWATCH_<FLAG> (--cluster: RDMAWATCH_CLICKHOUSE_CLUSTER).
const envAliasAnnotation = "rdmawatch_env_alias"

// envAlias makes flag of fs read the variable name too, after its own.
func envAlias(fs *pflag.FlagSet, flag, name string) {
	if err := fs.SetAnnotation(flag, envAliasAnnotation, []string{name}); err != nil {
		panic(err) // a flag defined just before: a typo here is a bug
	}
}

// noEnvAnnotation marks a flag the environment does not set.
const noEnvAnnotation = "rdmawatch_no_env"

// noEnv keeps the environment off a filter flag whose variable is another
// command's setting: RDMAWATCH_NODE names the collector's node (its
// systemd unit and DaemonSet set it), and an SRE running `rdmawatch query`
// or `events tail` on that host must not get one node's rows silently.
func noEnv(fs *pflag.FlagSet, flag string) {
	if err := fs.SetAnnotation(flag, noEnvAnnotation, []string{"true"}); err != nil {
		panic(err) // a flag defined just before: a typo here is a bug
	}
}

// flagEnv lists the variables of f, the first set of which applyConfig
// takes; none for a flag marked noEnv.
func flagEnv(f *pflag.Flag) []string {
	if len(f.Annotations[noEnvAnnotation]) > 0 {
		return nil
	}
	return append([]string{envName(f.Name)}, f.Annotations[envAliasAnnotation]...)
}

// describeEnv ends every flag's help with its variables, "(env
// RDMAWATCH_X)", made from flagEnv so the help names what applyConfig reads.
func describeEnv(c *cobra.Command) {
	describe := func(f *pflag.Flag) {
		env := flagEnv(f)
		if len(env) == 0 {
			return
		}
		suffix := " (env " + strings.Join(env, " or ") + ")"
		if f.Name != "help" && !strings.HasSuffix(f.Usage, suffix) {
			f.Usage += suffix
		}
	}
	c.Flags().VisitAll(describe)
	c.PersistentFlags().VisitAll(describe)
	for _, sub := range c.Commands() {
		describeEnv(sub)
	}
}

// configEntry is one key of the file with where it stood.
type configEntry struct {
	section, key, value string
	line                int
}

// looksLikeTOML: the first setting line is a [section] or key = value.
func looksLikeTOML(data []byte) bool {
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			return true
		}
		k, _, ok := strings.Cut(line, "=")
		return ok && !strings.Contains(k, ":") && strings.TrimSpace(k) != ""
	}
	return false
}

func yamlKind(k yaml.Kind) string {
	switch k {
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "single value"
	default:
		return "document of another kind"
	}
}

// readConfigFile parses path into entries; section "" is the top level.
func readConfigFile(path string) ([]configEntry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil, nil // an empty file sets nothing
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		if looksLikeTOML(data) {
			return nil, fmt.Errorf("%s:%d: this looks like TOML or INI (a [section] or key = value line); the file is YAML: `key: value` at the top level and `command:` sections holding them", path, root.Line)
		}
		return nil, fmt.Errorf("%s:%d: want a YAML mapping of settings at the top level (`key: value`), found a %s", path, root.Line, yamlKind(root.Kind))
	}
	var out []configEntry
	var walk func(section string, m *yaml.Node) error
	walk = func(section string, m *yaml.Node) error {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			switch v.Kind {
			case yaml.MappingNode:
				name := strings.TrimSpace(section + " " + k.Value)
				if err := walk(name, v); err != nil {
					return err
				}
			case yaml.ScalarNode:
				out = append(out, configEntry{section: section, key: k.Value, value: v.Value, line: k.Line})
			case yaml.SequenceNode:
				var items []string
				for _, it := range v.Content {
					if it.Kind != yaml.ScalarNode {
						return fmt.Errorf("%s:%d: key %q: a list of plain values only", path, it.Line, k.Value)
					}
					items = append(items, it.Value)
				}
				out = append(out, configEntry{section: section, key: k.Value, value: strings.Join(items, ","), line: k.Line})
			default:
				return fmt.Errorf("%s:%d: key %q: unsupported value", path, k.Line, k.Value)
			}
		}
		return nil
	}
	if err := walk("", root); err != nil {
		return nil, err
	}
	return out, nil
}

// commandPath is the section name of a command: "" for the root, "collector",
// "events tail".
func commandPath(cmd *cobra.Command) string {
	p := cmd.CommandPath()
	if i := strings.IndexByte(p, ' '); i >= 0 {
		return p[i+1:]
	}
	return ""
}

// checkConfig rejects keys that name no flag of their section's command (or
// no global flag at the top level).
func checkConfig(root *cobra.Command, path string, entries []configEntry) error {
	sections := map[string]*cobra.Command{"": root}
	var visit func(c *cobra.Command)
	visit = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			sections[commandPath(sub)] = sub
			visit(sub)
		}
	}
	visit(root)
	var errs []error
	for _, e := range entries {
		if _, ok := detectorSection(e.section); ok {
			continue // checked against the detectors themselves
		}
		c, ok := sections[e.section]
		if !ok {
			errs = append(errs, fmt.Errorf("%s:%d: section %q is not a command", path, e.line, e.section))
			continue
		}
		flags := c.Flags()
		if e.section == "" {
			flags = root.PersistentFlags()
		}
		if flags.Lookup(e.key) == nil && (e.section == "" || root.PersistentFlags().Lookup(e.key) == nil) {
			where := "a global flag"
			if e.section != "" {
				where = "a flag of " + e.section
			}
			errs = append(errs, fmt.Errorf("%s:%d: unknown key %q: not %s", path, e.line, e.key, where))
		}
	}
	return errors.Join(errs...)
}

// detectorPrefix is the file section of detector settings: the detector
// structs' exported fields, e.g.
//
//	processor:
//	  detectors:
//	    link_flap:
//	      stable_after: 2m
const detectorPrefix = "processor detectors "

func detectorSection(section string) (string, bool) {
	return strings.CutPrefix(section, detectorPrefix)
}

// detectorSettings reads the detector settings of a config file (none
// without one) and checks them against the registered detectors.
func detectorSettings(path string) (processor.Settings, error) {
	if path == "" {
		return nil, nil
	}
	entries, err := readConfigFile(path)
	if err != nil {
		return nil, err
	}
	dets, err := processor.NewDetectors()
	if err != nil {
		return nil, err
	}
	s := processor.Settings{}
	var errs []error
	for _, e := range entries {
		name, ok := detectorSection(e.section)
		if !ok {
			continue
		}
		// One entry at a time, so an error names its line.
		if err := (processor.Settings{name: {e.key: e.value}}).Apply(dets); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: processor.detectors: %w", path, e.line, err))
			continue
		}
		if s[name] == nil {
			s[name] = map[string]string{}
		}
		s[name][e.key] = e.value
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// applyConfig sets every flag of cmd the command line left alone, from the
// environment, then from the file's section of cmd, then its top level.
func applyConfig(root, cmd *cobra.Command, path string) error {
	var entries []configEntry
	if path != "" {
		var err error
		if entries, err = readConfigFile(path); err != nil {
			return err
		}
		if err := checkConfig(root, path, entries); err != nil {
			return err
		}
	}
	return errors.Join(applyEntries(cmd, path, entries)...)
}

// applyEntries is applyConfig with the file read: an error per flag whose
// value does not parse.
func applyEntries(cmd *cobra.Command, path string, entries []configEntry) []error {
	section := commandPath(cmd)
	cmd.InheritedFlags() // merges the global flags into cmd.Flags(), as Execute does
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "help" || f.Name == "config" {
			return
		}
		for _, name := range flagEnv(f) {
			if v, ok := os.LookupEnv(name); ok && v != "" {
				if err := setFlag(f, v, false); err != nil {
					errs = append(errs, fmt.Errorf("environment %s=%q: %w", name, maskValue(f.Name, v), err))
				}
				return
			}
		}
		for _, sec := range []string{section, ""} {
			for _, e := range entries {
				if e.section == sec && e.key == f.Name {
					if err := setFlag(f, e.value, true); err != nil {
						errs = append(errs, fmt.Errorf("%s:%d: key %q: %w", path, e.line, e.key, err))
					}
					return
				}
			}
		}
	})
	return errs
}

// setFlag sets a flag from the environment or the file (a list flag from
// the file takes a comma list) and marks it changed, as the command line
// does: a command that asks whether the user gave a value (Changed) must
// get the same answer wherever the value came from (a collector file's
// `speed: 30` was printed by config print and ignored by the collector,
// which ran at its scenario's 60).
func setFlag(f *pflag.Flag, v string, list bool) error {
	var err error
	if sv, ok := f.Value.(pflag.SliceValue); ok && list {
		err = sv.Replace(strings.Split(v, ","))
	} else {
		err = f.Value.Set(v)
	}
	if err == nil {
		f.Changed = true
	}
	return err
}

func newConfigCmd(g *global) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Check a configuration file, or print the effective configuration"}
	cmd.AddCommand(&cobra.Command{
		Use:   "check FILE",
		Short: "Check FILE: every key must name a flag, every value must parse and pass its command's checks",
		Long: `check reads FILE as every command it has a section for would at its start:
each key must name a flag of its section's command (or a global flag), each
value must parse, and each section's settings, layered as at a start (the
RDMAWATCH_ variables of this environment over the file over the defaults; no
command-line flags), must pass that command's checks: a file that a command
would refuse at its start is refused here, with the section named.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := checkConfigFile(cmd.Root(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d settings, all known and valid\n", args[0], n)
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "print [COMMAND...]",
		Short: "Print the effective settings (flags, environment, --config) of a command, secrets masked",
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			target := root
			if len(args) > 0 {
				c, _, err := root.Find(args)
				if err != nil {
					return err
				}
				target = c
			}
			if err := applyConfig(root, target, g.configPath); err != nil {
				return err
			}
			if err := printConfig(cmd.OutOrStdout(), root, target); err != nil {
				return err
			}
			if target.Name() == "processor" {
				return printDetectorSettings(cmd.OutOrStdout(), g.configPath)
			}
			return nil
		},
	})
	return cmd
}

// checkConfigFile is `config check`: the number of settings of path, or
// why a command would refuse them.
func checkConfigFile(root *cobra.Command, path string) (int, error) {
	entries, err := readConfigFile(path)
	if err != nil {
		return 0, err
	}
	if err := checkConfig(root, path, entries); err != nil {
		return 0, err
	}
	// The top level, then every command section in the file's order.
	sections := []string{""}
	seen := map[string]bool{"": true}
	for _, e := range entries {
		if _, ok := detectorSection(e.section); !ok && !seen[e.section] {
			seen[e.section] = true
			sections = append(sections, e.section)
		}
	}
	var errs []error
	reported := map[string]bool{}
	report := func(err error) {
		if err != nil && !reported[err.Error()] {
			reported[err.Error()] = true
			errs = append(errs, err)
		}
	}
	for _, sec := range sections {
		// A fresh command tree for each section, so checking changes
		// nothing and no section sees another's values.
		g := &global{}
		probe := newRootOf(g)
		c := probe
		if sec != "" {
			if c, _, err = probe.Find(strings.Fields(sec)); err != nil {
				return 0, err // checkConfig named every section
			}
		}
		parseErrs := applyEntries(c, path, entries)
		for _, err := range parseErrs {
			report(err)
		}
		if len(parseErrs) > 0 {
			continue
		}
		where := "top level"
		if sec != "" {
			where = "section " + sec
		}
		if err := g.validate(); err != nil {
			report(fmt.Errorf("%s: %w", path, err)) // the same whatever the section
		}
		if err := g.validateCommand(c); err != nil {
			report(fmt.Errorf("%s: %s: %w", path, where, err))
		}
	}
	if _, err := detectorSettings(path); err != nil {
		report(err)
	}
	return len(entries), errors.Join(errs...)
}

// validator is a command's options struct: validate checks the settings
// after the layering, naming the flag and the value it refuses. It reads
// nothing but the settings (no file, no network), so `config check` can run
// it anywhere.
type validator interface{ validate() error }

// validates makes v the check of cmd's options.
func (g *global) validates(cmd *cobra.Command, v validator) {
	if g.validators == nil {
		g.validators = map[*cobra.Command]validator{}
	}
	g.validators[cmd] = v
}

// validateCommand checks cmd's settings after the layering: its options,
// then for a role the addresses it dials at its start (a one-shot command
// checks them when it dials, after its own arguments). setUp runs it before
// every command, config check on every section of the file.
func (g *global) validateCommand(cmd *cobra.Command) error {
	if v := g.validators[cmd]; v != nil {
		if err := v.validate(); err != nil {
			return err
		}
	}
	if !roles[cmd.Name()] || cmd.Parent() != cmd.Root() {
		return nil
	}
	if err := checkURLs("--nats", g.natsURL, true, natsSchemes...); err != nil {
		return err
	}
	if cmd.Name() == "sink" {
		return g.requireClickHouse()
	}
	return nil
}

// maskValue hides secrets in what config print shows: values of flags
// whose name says they are secret, and passwords inside URLs and DSNs.
func maskValue(name, v string) string {
	for _, w := range []string{"password", "secret", "token"} {
		if strings.Contains(name, w) && v != "" {
			return "****"
		}
	}
	return redact.String(v)
}

func printConfig(w io.Writer, root, cmd *cobra.Command) error {
	type kv struct{ k, v string }
	var rows []kv
	seen := map[string]bool{}
	add := func(fs *pflag.FlagSet) {
		fs.VisitAll(func(f *pflag.Flag) {
			if seen[f.Name] || f.Name == "help" {
				return
			}
			seen[f.Name] = true
			rows = append(rows, kv{f.Name, maskValue(f.Name, f.Value.String())})
		})
	}
	add(cmd.Flags())
	add(root.PersistentFlags())
	sort.Slice(rows, func(i, j int) bool { return rows[i].k < rows[j].k })
	for _, r := range rows {
		if _, err := fmt.Fprintf(w, "%s: %s\n", r.k, r.v); err != nil {
			return err
		}
	}
	return nil
}

// printDetectorSettings prints every detector's settings as the processor
// would run them: the defaults, with the file's settings applied.
func printDetectorSettings(w io.Writer, path string) error {
	s, err := detectorSettings(path)
	if err != nil {
		return err
	}
	dets, err := processor.NewDetectors()
	if err != nil {
		return err
	}
	if err := s.Apply(dets); err != nil {
		return err
	}
	fmt.Fprintln(w, "detectors:")
	for _, d := range dets {
		fmt.Fprintf(w, "  %s:\n", d.Name())
		tun := processor.Tunables(d)
		keys := make([]string, 0, len(tun))
		for k := range tun {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "    %s: %s\n", k, tun[k])
		}
	}
	return nil
}
