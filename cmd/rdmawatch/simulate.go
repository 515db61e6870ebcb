//go:build !fleet

package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/sim"
)

func newSimulateCmd(g *global) *cobra.Command {
	var (
		out, scenario string
		gz            bool
		seed          uint64
	)
	cmd := &cobra.Command{
		Use:   "simulate --out DIR [--scenario NAME]",
		Short: "Write a simulated fleet as a labelled trace (trace v1, topology v1, labels v1)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			sc, ok := sim.ScenarioByName(scenario)
			if !ok {
				var names []string
				for _, s := range sim.Scenarios() {
					names = append(names, s.Name)
				}
				return fmt.Errorf("--scenario %q: not one of %s", scenario, strings.Join(names, ", "))
			}
			cfg := sc.Config
			if cmd.Flags().Changed("seed") {
				cfg.Seed = seed
			}
			sum, err := sim.WriteFiles(cfg, out, gz)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s to %s: %+v\n", sc.Name, out, *sum)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "directory for trace.jsonl[.gz], topology.json and labels.jsonl")
	f.StringVar(&scenario, "scenario", "example-fleet", "scenario to simulate")
	f.BoolVar(&gz, "gzip", false, "gzip the trace")
	f.Uint64Var(&seed, "seed", 0, "override the scenario's random seed")
	return cmd
}
