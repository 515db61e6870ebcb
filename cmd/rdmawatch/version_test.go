package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

func TestReadBuildInfo(t *testing.T) {
	vcs := func(kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "(devel)"}}
		for i := 0; i+1 < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	for _, tc := range []struct {
		name    string
		bi      *debug.BuildInfo
		stamped [3]string // version, commit, date from -ldflags
		want    []string
		wantNot []string
	}{
		{name: "unstamped: from vcs settings",
			bi:      vcs("vcs.revision", "0123456789abcdef", "vcs.time", "2026-12-01T10:00:00Z", "vcs.modified", "false"),
			stamped: [3]string{"dev", "", ""},
			want:    []string{"rdmawatch dev (wire schema v", "commit:     0123456789abcdef\n", "build date: 2026-12-01T10:00:00Z", "go version: go1.99 "},
			wantNot: []string{"modified"}},
		{name: "modified tree",
			bi:      vcs("vcs.revision", "abc", "vcs.modified", "true"),
			stamped: [3]string{"dev", "", ""},
			want:    []string{"commit:     abc (modified)", "build date: unknown"}},
		{name: "stamped wins",
			bi:      vcs("vcs.revision", "abc", "vcs.time", "2026-12-01T10:00:00Z"),
			stamped: [3]string{"v1.4.0", "fff", "2026-12-02"},
			want:    []string{"rdmawatch v1.4.0 ", "commit:     fff\n", "build date: 2026-12-02"}},
		{name: "go install of a tagged module",
			bi:      &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v1.5.0"}},
			stamped: [3]string{"dev", "", ""},
			want:    []string{"rdmawatch v1.5.0 ", "commit:     unknown"}},
		{name: "no build info",
			stamped: [3]string{"dev", "", ""},
			want:    []string{"rdmawatch dev ", "commit:     unknown", "go version: go"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(v, c, d string) { version, commit, buildDate = v, c, d }(version, commit, buildDate)
			version, commit, buildDate = tc.stamped[0], tc.stamped[1], tc.stamped[2]
			got := readBuildInfo(tc.bi, tc.bi != nil).String()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("missing %q in\n%s", w, got)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(got, w) {
					t.Errorf("unexpected %q in\n%s", w, got)
				}
			}
		})
	}
}

// TestVersionFlag: --version and the version command print the same lines.
func TestVersionFlag(t *testing.T) {
	var outs []string
	for _, args := range [][]string{{"--version"}, {"version"}} {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !strings.Contains(out.String(), "commit:") || !strings.Contains(out.String(), "go version:") {
			t.Fatalf("%v printed %q", args, out.String())
		}
		outs = append(outs, out.String())
	}
	if outs[0] != outs[1] {
		t.Errorf("--version %q != version %q", outs[0], outs[1])
	}
}
