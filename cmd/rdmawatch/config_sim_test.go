//go:build !fleet

package main

import (
	"testing"

	"github.com/spf13/cobra"
)

// TestConfigSimSpeedFromFile: `speed: 30` in a collector section reaches
// the simulated fleet (it was printed by config print and ignored: the
// fleet ran at its scenario's 60, because the value from the file did not
// count as given).
func TestConfigSimSpeedFromFile(t *testing.T) {
	path := writeConfig(t, "collector:\n  sim-nodes: 2\n  speed: 30\n")
	root := &cobra.Command{Use: "rdmawatch"}
	c := &cobra.Command{Use: "collector", Run: func(*cobra.Command, []string) {}}
	var sf simFlags
	sf.register(c)
	root.AddCommand(c)
	if err := applyConfig(root, c, path); err != nil {
		t.Fatal(err)
	}
	fl, err := sf.build(c.Flags().Changed)
	if err != nil {
		t.Fatal(err)
	}
	if fl.speed != 30 {
		t.Errorf("speed %v, want the file's 30", fl.speed)
	}
}
