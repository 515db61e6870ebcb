package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// version, commit and buildDate are set with -ldflags "-X main.version=..."
// by the Makefile. A plain `go build` or `go install` stamps none of them:
// then the module's build info supplies the VCS revision and time.
var (
	version   = "dev"
	commit    = ""
	buildDate = ""
)

// buildInfo is what `rdmawatch version` and --version print.
type buildInfo struct {
	Version, Commit, Date, GoVersion, Platform string
	Modified                                   bool
}

// readBuildInfo fills what -ldflags did not stamp from the build info Go
// embeds (vcs.revision, vcs.time, vcs.modified), so an unstamped binary
// still says which commit it is.
func readBuildInfo(bi *debug.BuildInfo, ok bool) buildInfo {
	b := buildInfo{Version: version, Commit: commit, Date: buildDate, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if !ok || bi == nil {
		return b
	}
	if bi.GoVersion != "" {
		b.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if b.Commit == "" {
				b.Commit = s.Value
			}
		case "vcs.time":
			if b.Date == "" {
				b.Date = s.Value
			}
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	if b.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		// go install module@v1.2.3 records the module version.
		b.Version = bi.Main.Version
	}
	return b
}

func currentBuildInfo() buildInfo { return readBuildInfo(debug.ReadBuildInfo()) }

// String is the text of --version, in the shape of Prometheus' and
// node_exporter's: the version line first, then one fact per line.
func (b buildInfo) String() string {
	orUnknown := func(s string) string {
		if s == "" {
			return "unknown"
		}
		return s
	}
	c := orUnknown(b.Commit)
	if b.Modified {
		c += " (modified)"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "rdmawatch %s (wire schema v%d)\n", b.Version, schemas.Version)
	fmt.Fprintf(&sb, "  commit:     %s\n", c)
	fmt.Fprintf(&sb, "  build date: %s\n", orUnknown(b.Date))
	fmt.Fprintf(&sb, "  go version: %s %s\n", b.GoVersion, b.Platform)
	return sb.String()
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build date and Go version (also --version)",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			fmt.Fprint(cmd.OutOrStdout(), currentBuildInfo())
		},
	}
}
