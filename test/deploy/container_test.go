package deploy

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// dockerInstr is one Dockerfile instruction with its continuation lines
// joined.
type dockerInstr struct {
	Op, Args string
	Line     int
}

type dockerStage struct {
	From, Name string
	Instrs     []dockerInstr
}

func parseDockerfile(path string) ([]dockerStage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		stages  []dockerStage
		pending string
		start   int
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if pending == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if pending == "" {
			start = n
		}
		if strings.HasSuffix(line, "\\") {
			pending += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		full := pending + line
		pending = ""
		op, args, _ := strings.Cut(full, " ")
		in := dockerInstr{Op: strings.ToUpper(op), Args: strings.TrimSpace(args), Line: start}
		if in.Op == "FROM" {
			fields := strings.Fields(in.Args)
			st := dockerStage{From: fields[0]}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				st.Name = fields[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if in.Op == "ARG" {
				continue // an ARG before the first FROM
			}
			return nil, fmt.Errorf("line %d: %s before FROM", in.Line, in.Op)
		}
		stages[len(stages)-1].Instrs = append(stages[len(stages)-1].Instrs, in)
	}
	if pending != "" {
		return nil, fmt.Errorf("the file ends in a continuation line")
	}
	return stages, sc.Err()
}

// goBuildRun finds the build stage's RUN that builds the binary.
func goBuildRun(st dockerStage) (dockerInstr, bool) {
	for _, in := range st.Instrs {
		if in.Op == "RUN" && strings.Contains(in.Args, "go build") && strings.Contains(in.Args, "./cmd/rdmawatch") {
			return in, true
		}
	}
	return dockerInstr{}, false
}

func TestDockerfile(t *testing.T) {
	path := filepath.Join(root(t), "deploy", "container", "Dockerfile")
	stages, err := parseDockerfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a multi-stage build", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	run, ok := goBuildRun(build)
	switch {
	case !ok:
		t.Errorf("the build stage has no RUN ... go build ... ./cmd/rdmawatch")
	case !strings.Contains(run.Args, "CGO_ENABLED=0"):
		t.Errorf("line %d: the binary is not built with CGO_ENABLED=0 (static)", run.Line)
	}
	if final.From != "scratch" && !strings.Contains(final.From, "distroless") {
		t.Errorf("final stage FROM %s: want scratch or a distroless image (nothing but the binary)", final.From)
	}
	var user, entry string
	copied := false
	for _, in := range final.Instrs {
		switch in.Op {
		case "USER":
			user = in.Args
		case "ENTRYPOINT":
			entry = in.Args
		case "COPY":
			if strings.Contains(in.Args, "--from="+build.Name) && strings.Contains(in.Args, "rdmawatch") {
				copied = true
			}
		case "RUN":
			t.Errorf("line %d: RUN in the final stage: it has no shell", in.Line)
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	if uid == "" || uid == "0" || uid == "root" {
		t.Errorf("final stage USER %q: want a non-root user", user)
	}
	if !copied {
		t.Errorf("the final stage does not copy the binary from the build stage %q", build.Name)
	}
	if !strings.Contains(entry, "rdmawatch") {
		t.Errorf("ENTRYPOINT %q: want the rdmawatch binary", entry)
	}
	if _, err := os.Stat(path + ".dockerignore"); err != nil {
		t.Errorf("no %s.dockerignore: %v", filepath.Base(path), err)
	}
}

// TestDockerfileBuildIsStatic runs the Dockerfile's own go build command
// (its output moved to a temporary file) and checks the binary is static:
// no ELF interpreter and no shared libraries, so it runs in a scratch image.
func TestDockerfileBuildIsStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary: skipped with -short")
	}
	r := root(t)
	stages, err := parseDockerfile(filepath.Join(r, "deploy", "container", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	run, ok := goBuildRun(stages[0])
	if !ok {
		t.Fatal("no go build in the build stage")
	}
	out := filepath.Join(t.TempDir(), "rdmawatch")
	script := strings.Replace(run.Args, "-o /out/rdmawatch", "-o "+out, 1)
	if script == run.Args {
		t.Fatalf("line %d: the build does not write -o /out/rdmawatch, which the final stage copies", run.Line)
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = r
	cmd.Env = append(os.Environ(), "VERSION=test")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, b)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has an ELF interpreter: it is dynamically linked")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v (%v)", libs, err)
	}
	if v, err := exec.Command(out, "version").Output(); err != nil || !strings.Contains(string(v), "rdmawatch test") {
		t.Errorf("%s version = %q, %v: want the version from the build argument", out, v, err)
	}
}
