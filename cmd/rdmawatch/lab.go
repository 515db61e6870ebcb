//go:build !fleet

package main

import "github.com/spf13/cobra"

// labCommands are the jobs that put the whole pipeline in one process or
// make data for it: replay and run (the embedded NATS, the pipeline),
// simulate and eval (the simulator, the scorer). The fleet build
// (`-tags fleet`, the DaemonSet's and the services' image) leaves them out,
// and with them nats-server and the simulator; `collector --source sim`
// goes too.
func labCommands(g *global) []*cobra.Command {
	return []*cobra.Command{newReplayCmd(g), newRunCmd(g), newSimulateCmd(g), newEvalCmd(g)}
}
