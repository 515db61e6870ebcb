// Command altgen writes a trace, topology and labels with the independent
// generator (test/altgen): go run ./test/altgen/cmd/altgen -preset mix -seed 7 -out DIR
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/rdmawatch/rdmawatch/test/altgen"
)

func main() {
	preset := flag.String("preset", "mix", "healthy | pfc | ber-roce | ber-ib | cnp | retrans | starve | layers | misconfig | mix | wide (see altgen.Preset)")
	seed := flag.Uint64("seed", 1, "random seed")
	interval := flag.Duration("interval", 5*time.Second, "collection interval")
	minutes := flag.Int("minutes", 0, "duration in minutes (0: the preset's)")
	out := flag.String("out", "", "output directory")
	gz := flag.Bool("gz", true, "gzip the trace")
	nic := flag.String("nic", "full", "what the hosts' driver lists: full | mlx5-upstream | global-pause | bonded (see altgen's nic.go)")
	physics := flag.String("physics", "fixed", "fixed (the historical constants) | random (drawn from the seed and preset, see altgen's physics.go)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "-out is required")
		os.Exit(2)
	}
	cfg, err := altgen.Preset(*preset, *seed, *interval)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg.NIC = *nic
	switch *physics {
	case "fixed":
	case "random":
		cfg.RandomPhysics = true
		if !flagSet("nic") {
			cfg.NIC = "" // the drawn profile
		}
	default:
		fmt.Fprintf(os.Stderr, "-physics %q is not fixed or random\n", *physics)
		os.Exit(2)
	}
	if *minutes > 0 {
		cfg.Duration = time.Duration(*minutes) * time.Minute
	}
	if err := altgen.Generate(cfg, *out, *gz); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
