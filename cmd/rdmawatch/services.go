package main

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/processor/runtime"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// connectJS dials NATS and makes sure the streams exist.
func connectJS(cmd *cobra.Command, g *global, name string, partitions int) (jetstream.JetStream, func(), error) {
	nc, err := natsutil.Connect(natsutil.ConnectOptions{URL: g.natsURL, Creds: g.natsCreds, Name: name})
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	if err := natsutil.EnsureStreams(cmd.Context(), js, schemas.StreamOptions{Partitions: partitions}); err != nil {
		nc.Close()
		return nil, nil, err
	}
	return js, nc.Close, nil
}

func newProcessorCmd(g *global) *cobra.Command {
	var (
		topologyPath        string
		instance, instances int
		partitions          int
		lateness, warmup    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "processor",
		Short: "Run the detectors over the counters stream and publish incident events",
		Long: `processor consumes the partitions of the counters stream it owns (partition p
belongs to instance p mod --instances), keeps per-port windows in data time,
runs every registered detector and publishes events. After a restart it rebuilds
its windows from the last --warmup of the stream; event ids are deterministic, so
re-emitted events are dropped by JetStream's duplicate window.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if instances < 1 || instance < 0 || instance >= instances {
				return fmt.Errorf("--instance %d of --instances %d: want 0 <= instance < instances", instance, instances)
			}
			topo, err := loadTopology(topologyPath)
			if err != nil {
				return err
			}
			js, closeNC, err := connectJS(cmd, g, fmt.Sprintf("rdmawatch-processor-%d", instance), partitions)
			if err != nil {
				return err
			}
			defer closeNC()
			p, err := runtime.New(js, runtime.Config{
				Partitions:      partitions,
				Instances:       instances,
				Instance:        instance,
				Topology:        topo,
				AllowedLateness: lateness,
				WarmUp:          warmup,
			}, g.log)
			if err != nil {
				return err
			}
			g.log.Info("processor started", "instance", instance, "instances", instances, "partitions", partitions)
			return p.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&topologyPath, "topology", envOr("RDMAWATCH_TOPOLOGY", ""), "fabric topology file, format v1 (env RDMAWATCH_TOPOLOGY)")
	f.IntVar(&instance, "instance", 0, "this instance's index, from 0")
	f.IntVar(&instances, "instances", 1, "number of processor instances sharing the partitions")
	f.IntVar(&partitions, "partitions", schemas.DefaultPartitions, "partitions of the counters stream")
	f.DurationVar(&lateness, "allowed-lateness", 0, "how late (data time) a sample may arrive behind the newest one; 0 adapts to the observed collection interval")
	f.DurationVar(&warmup, "warmup", 2*time.Hour, "how much of the stream to re-read at start to rebuild windows")
	return cmd
}
