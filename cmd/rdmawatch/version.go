package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// version is set with -ldflags "-X main.version=..." by the Makefile.
var version = "dev"

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			v := version
			if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						v = "dev-" + s.Value[:min(12, len(s.Value))]
					}
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rdmawatch %s (wire schema v%d)\n", v, schemas.Version)
		},
	}
}
