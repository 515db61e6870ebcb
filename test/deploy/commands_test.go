package deploy

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// shippedCommand is one rdmawatch command line a shipped file runs: its
// arguments after the binary, and where it is.
type shippedCommand struct {
	where string
	args  []string
}

// unitExec finds the rdmawatch command of an ExecStart= line, also in a
// comment (the drop-in examples of the units).
var unitExec = regexp.MustCompile(`^[#;\s]*ExecStart=/usr/local/bin/rdmawatch\s+(.*)$`)

// shippedCommands lists the rdmawatch commands of the systemd units (their
// ExecStart= lines, comments included) and of the Kubernetes manifests (the
// arguments of every container of the rdmawatch image, whose entry point is
// the binary).
func shippedCommands(t *testing.T, r string) []shippedCommand {
	t.Helper()
	var out []shippedCommand
	units, _ := filepath.Glob(filepath.Join(r, "deploy", "systemd", "*.service"))
	for _, f := range units {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for n := 1; sc.Scan(); n++ {
			if m := unitExec.FindStringSubmatch(sc.Text()); m != nil {
				out = append(out, shippedCommand{fmt.Sprintf("deploy/systemd/%s:%d", filepath.Base(f), n), strings.Fields(m[1])})
			}
		}
	}
	m := loadManifests(t, filepath.Join(r, "deploy", "kubernetes"))
	for key, w := range m.workloads {
		spec := w.Spec.Template.Spec
		for _, c := range append(append([]k8sContainer(nil), spec.InitContainers...), spec.Containers...) {
			if strings.HasPrefix(c.Image, "rdmawatch") && c.Command == nil {
				out = append(out, shippedCommand{"deploy/kubernetes " + key + " container " + c.Name, c.Args})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].where < out[j].where })
	return out
}

// usageFlag is a flag line of cobra's help: "  -h, --help", "      --raw
// duration   keep ...": a type word after the name means it takes a value.
var usageFlag = regexp.MustCompile(`^\s+(?:-[A-Za-z0-9], )?--([a-z0-9][a-z0-9-]*)( [a-zA-Z0-9]+)?\s{2,}`)

// commandWord is a word of a command path in cobra's usage line.
var commandWord = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// commandProblems runs the command with --help through the binary: cobra
// refuses an unknown command, an unknown flag and a value its flag cannot
// take before it prints the help. The help's usage line then says which
// command it is (a mistyped subcommand gets its parent's help), and its
// flag list which flags take a value, so that no word is left over as a
// positional argument (the shipped commands take none).
func commandProblems(bin string, c shippedCommand) []string {
	if len(c.args) == 0 {
		return []string{c.where + ": no command: the binary alone runs nothing"}
	}
	cmd := exec.Command(bin, append(append([]string(nil), c.args...), "--help")...)
	// Not the test's RDMAWATCH_* settings: only the command line counts.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return []string{fmt.Sprintf("%s: rdmawatch %s: %v\n%s", c.where, strings.Join(c.args, " "), err, out)}
	}
	var usage []string
	flags := map[string]bool{} // name -> takes a value
	lines := strings.Split(string(out), "\n")
	for i, l := range lines {
		if l == "Usage:" && i+1 < len(lines) {
			for _, f := range strings.Fields(lines[i+1]) {
				if !commandWord.MatchString(f) {
					break
				}
				usage = append(usage, f)
			}
		}
		if m := usageFlag.FindStringSubmatch(l); m != nil {
			flags[m[1]] = m[2] != ""
		}
	}
	var path []string
	i := 0
	for ; i < len(c.args) && !strings.HasPrefix(c.args[i], "-"); i++ {
		path = append(path, c.args[i])
	}
	if want := "rdmawatch " + strings.Join(path, " "); strings.Join(usage, " ") != want {
		return []string{fmt.Sprintf("%s: %q is not a command: the binary's help is that of %q", c.where, want, strings.Join(usage, " "))}
	}
	var problems []string
	for ; i < len(c.args); i++ {
		a := c.args[i]
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		takes, known := flags[name]
		switch {
		case !strings.HasPrefix(a, "--"):
			problems = append(problems, fmt.Sprintf("%s: %q is a positional argument, which `rdmawatch %s` is not given here", c.where, a, strings.Join(path, " ")))
		case !known:
			problems = append(problems, fmt.Sprintf("%s: flag %s is not in the help of `rdmawatch %s`", c.where, a, strings.Join(path, " ")))
		case takes && !hasValue:
			i++ // its value
		}
	}
	return problems
}

// TestShippedCommandsAreReal checks every command the systemd units and the
// Kubernetes manifests run (the retention timer's and CronJob's included)
// against the binary built from this tree: a real subcommand, real flags,
// values the flags take. It first proves the check catches each of those
// mistakes, with the same binary.
func TestShippedCommandsAreReal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary: skipped with -short")
	}
	r := root(t)
	cmds := shippedCommands(t, r)
	found := map[string]bool{}
	for _, c := range cmds {
		if len(c.args) > 0 {
			found[c.args[0]] = true
		}
	}
	for _, want := range []string{"collector", "processor", "sink", "alert", "streams", "migrate", "retention"} {
		if !found[want] {
			t.Errorf("no shipped file runs `rdmawatch %s`: the listing of commands is broken", want)
		}
	}
	bin := filepath.Join(t.TempDir(), "rdmawatch")
	build := exec.Command("go", "build", "-o", bin, "./cmd/rdmawatch")
	build.Dir = r
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/rdmawatch: %v\n%s", err, out)
	}

	for _, c := range []struct {
		name string
		args []string
		ok   bool
	}{
		{"retention", []string{"retention"}, true},
		{"flags with values", []string{"retention", "--raw", "720h", "--day=0", "--dry-run"}, true},
		{"a subcommand", []string{"streams", "apply"}, true},
		{"misspelt command", []string{"retension"}, false},
		{"misspelt subcommand", []string{"streams", "aply"}, false},
		{"unknown flag", []string{"retention", "--rwa", "720h"}, false},
		{"bad value", []string{"retention", "--raw", "two weeks"}, false},
		{"positional argument", []string{"retention", "--dry-run", "extra"}, false},
		{"nothing", nil, false},
	} {
		t.Run("the check: "+c.name, func(t *testing.T) {
			problems := commandProblems(bin, shippedCommand{"case", c.args})
			if (len(problems) == 0) != c.ok {
				t.Errorf("commandProblems(%q) = %q, want problems: %v", c.args, problems, !c.ok)
			}
		})
	}

	for _, c := range cmds {
		for _, p := range commandProblems(bin, c) {
			t.Error(p)
		}
		t.Logf("%s: rdmawatch %s", c.where, strings.Join(c.args, " "))
	}
}
