//go:build !fleet

package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/sim"
)

// simulateFlags are the settings of simulate.
type simulateFlags struct {
	out, scenario string
	gz            bool
	seed          uint64
}

// validate checks --scenario; --out is required at the start.
func (o *simulateFlags) validate() error {
	_, err := o.findScenario()
	return err
}

func (o *simulateFlags) findScenario() (sim.Scenario, error) {
	sc, ok := sim.ScenarioByName(o.scenario)
	if !ok {
		var names []string
		for _, s := range sim.Scenarios() {
			names = append(names, s.Name)
		}
		return sc, fmt.Errorf("--scenario %q: not one of %s", o.scenario, strings.Join(names, ", "))
	}
	return sc, nil
}

func newSimulateCmd(g *global) *cobra.Command {
	var o simulateFlags
	cmd := &cobra.Command{
		Use:   "simulate --out DIR [--scenario NAME]",
		Short: "Write a simulated fleet as a labelled trace (trace v1, topology v1, labels v1)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.out == "" {
				return fmt.Errorf("--out is required")
			}
			sc, err := o.findScenario()
			if err != nil {
				return err
			}
			cfg := sc.Config
			if cmd.Flags().Changed("seed") {
				cfg.Seed = o.seed
			}
			sum, err := sim.WriteFiles(cfg, o.out, o.gz)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s to %s: %+v\n", sc.Name, o.out, *sum)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.out, "out", "", "directory for trace.jsonl[.gz], topology.json and labels.jsonl")
	f.StringVar(&o.scenario, "scenario", "example-fleet", "scenario to simulate")
	f.BoolVar(&o.gz, "gzip", false, "gzip the trace")
	f.Uint64Var(&o.seed, "seed", 0, "override the scenario's random seed")
	g.validates(cmd, &o)
	return cmd
}
