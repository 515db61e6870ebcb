package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The patterns are assembled from parts so that this file does not match
// them itself.
var (
	// A design document that is not in the repository: the contracts are in
	// docs/.
	designDoc = regexp.MustCompile(`(?i)\b` + "DESIGN" + `\.md\b`)
	// The workplace's absolute paths: a checkout can live anywhere.
	workplacePath = regexp.MustCompile(`(^|[^A-Za-z0-9_.])/` + "work" + `/[A-Za-z0-9_.]`)
	// A relative path that starts with "../" where a path can start (not in
	// the middle of one, like dir/../x).
	relativeUp = regexp.MustCompile("(?:^|[\\s\"'(`=:,\\[])((?:\\.\\./)+[^\\s\"'()`,\\]]*)")
)

// trackedFiles lists the repository's files: git's index when this is a git
// checkout, else every file below root but .git.
func trackedFiles(t *testing.T, root string) []string {
	t.Helper()
	if out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output(); err == nil && len(out) > 0 {
		var files []string
		for _, f := range bytes.Split(bytes.TrimRight(out, "\x00"), []byte{0}) {
			files = append(files, string(f))
		}
		return files
	}
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".clickhouse" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(root, path)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// outsideRefs returns, for one file's content, the references that point
// outside the repository: a design document that is not in it, a workplace
// path, or a relative path that climbs above the root.
func outsideRefs(root, file string, content []byte) []string {
	var found []string
	for n, line := range strings.Split(string(content), "\n") {
		where := file + ":" + itoa(n+1)
		if m := designDoc.FindString(line); m != "" {
			found = append(found, where+": names "+m+", which is not in the repository (the contracts are in docs/)")
		}
		if workplacePath.MatchString(line) {
			found = append(found, where+": absolute path outside the repository: "+strings.TrimSpace(line))
		}
		for _, m := range relativeUp.FindAllStringSubmatch(line, -1) {
			dest := filepath.Join(root, filepath.Dir(file), m[1])
			if rel, err := filepath.Rel(root, dest); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
				found = append(found, where+": "+m[1]+" leaves the repository")
			}
		}
	}
	return found
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

func TestOutsideRefsDetects(t *testing.T) {
	root := "/repo"
	for _, c := range []struct {
		name, file, line string
		want             bool
	}{
		{"design doc", "README.md", "fixed in " + "DESIGN" + ".md; examples", true},
		{"design doc lower case", "x.go", "// see " + "design" + ".md", true},
		{"shared examples from a package", "collector/trace_test.go", `os.ReadFile("../../` + `shared/examples/trace.jsonl")`, true},
		{"workplace path", "schemas/t.go", `os.ReadFile("/` + `work/shared/x.json")`, true},
		{"inside the repo", "collector/sim/x_test.go", `const dir = "../../test/scenarios"`, false},
		{"docs link inside", "docs/a.md", "see [b](../README.md)", false},
		{"dotdot inside a path", "collector/sysfstest/t.go", `"mlx5_0/../../etc/passwd = x"`, false},
		{"no reference", "a.go", "x := a / b", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := outsideRefs(root, c.file, []byte(c.line))
			if (len(got) > 0) != c.want {
				t.Errorf("outsideRefs(%q, %q) = %q, want a finding: %v", c.file, c.line, got, c.want)
			}
		})
	}
}

// TestNoReferenceOutsideRepository keeps the repository self-contained:
// no tracked file may refer to a design document that is not in it or to a
// path outside it. The contracts are in docs/.
func TestNoReferenceOutsideRepository(t *testing.T) {
	r := root(t)
	files := trackedFiles(t, r)
	if len(files) < 20 {
		t.Fatalf("found %d files: the file listing is broken", len(files))
	}
	var found []string
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(r, f))
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree, not yet in the index
			}
			t.Fatal(err)
		}
		if bytes.IndexByte(b, 0) >= 0 {
			continue // binary
		}
		found = append(found, outsideRefs(r, f, b)...)
	}
	for _, f := range found {
		t.Error(f)
	}
}
