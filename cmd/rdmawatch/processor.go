package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/processor"
	_ "github.com/rdmawatch/rdmawatch/processor/detect/all" // every detector registers itself
	"github.com/rdmawatch/rdmawatch/processor/engine"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// processorFlags are the processor command's own flags.
type processorFlags struct {
	topologyPath        string
	instance, instances int
	lateness, warmup    time.Duration
	group, member       string
	memberTTL           time.Duration
	maxPortsPerNode     int
	// changed reports whether a flag was given (command line, environment
	// or file): --group refuses --instance and --instances.
	changed func(string) bool
}

// validate checks the processor's settings before it reads the topology
// or connects.
func (o *processorFlags) validate() error {
	switch {
	case o.maxPortsPerNode < 1:
		return fmt.Errorf("--max-ports-per-node %d: want 1 or more", o.maxPortsPerNode)
	case o.instances < 1 || o.instance < 0 || o.instance >= o.instances:
		return fmt.Errorf("--instance %d of --instances %d: want 0 <= instance < instances", o.instance, o.instances)
	case o.group != "" && (o.changed("instance") || o.changed("instances")):
		return errors.New("--group shares the partitions among its live members: drop --instance and --instances")
	case o.memberTTL <= 0:
		return fmt.Errorf("--member-ttl %s: want a positive duration such as %s", o.memberTTL, engine.DefaultMemberTTL)
	case o.lateness < 0:
		return fmt.Errorf("--allowed-lateness %s: want 0 (adapt) or more", o.lateness)
	case o.warmup < 0:
		return fmt.Errorf("--warmup %s: want 0 or more", o.warmup)
	}
	return nil
}

func (o *processorFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	o.changed = f.Changed
	f.StringVar(&o.topologyPath, "topology", "", "fabric topology file, format v1")
	f.IntVar(&o.instance, "instance", 0, "this instance's index, from 0")
	f.IntVar(&o.instances, "instances", 1, "number of processor instances sharing the partitions")
	f.StringVar(&o.group, "group", "", "share the partitions with the live members of this processor group instead of --instance/--instances: a join or a leave moves only the partitions balance needs; a member that dies is taken over about --member-ttl after its last heartbeat, then its windows are rebuilt (warm-up)")
	f.StringVar(&o.member, "member", "", "this processor's name in --group (default: host, pid and a random tail)")
	f.DurationVar(&o.memberTTL, "member-ttl", engine.DefaultMemberTTL, "how long a silent group member keeps its partitions (its takeover time); keep it longer than a NATS leader election")
	f.IntVar(&o.maxPortsPerNode, "max-ports-per-node", engine.DefaultMaxPortsPerNode, "ports a node may have tracked while no inventory of it is known (with one, as many as it lists); samples of further new ports are refused and the node dead-lettered once")
	deprecatePartitions(cmd)
	f.DurationVar(&o.lateness, "allowed-lateness", 0, "how late (data time) a sample may arrive behind the newest one; 0 adapts to the observed collection interval")
	f.DurationVar(&o.warmup, "warmup", 2*time.Hour, "how much of the stream to re-read at start to rebuild windows")
}

func newProcessorCmd(g *global) *cobra.Command {
	var o processorFlags
	cmd := &cobra.Command{
		Use:   "processor",
		Short: "Run the detectors over the counters stream and publish incident events",
		Long: `processor consumes the partitions of the counters stream it owns (partition p
belongs to instance p mod --instances), keeps per-port windows in data time,
runs every registered detector and publishes events. The partition count is
read from the counters stream's transform (set by rdmawatch streams apply).
After a restart it rebuilds its windows from the last --warmup of the stream;
event ids are deterministic, so re-emitted events are dropped by JetStream's
duplicate window.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runProcessor(cmd, g, o)
		},
	}
	o.register(cmd)
	g.validates(cmd, &o)
	return cmd
}

// processorRole is what runProcessor needs of engine.Processor and
// engine.Elastic alike.
type processorRole interface {
	Run(context.Context) error
	Stats() engine.Stats
}

// runProcessor runs the role on settings validate checked.
func runProcessor(cmd *cobra.Command, g *global, o processorFlags) error {
	topo, err := loadTopology(o.topologyPath)
	if err != nil {
		return err
	}
	// A detector setting nobody has, or one that does not parse, fails
	// here, before the role connects and waits for NATS.
	settings, err := detectorSettings(g.configPath)
	if err != nil {
		return err
	}
	tel, err := serveTelemetry(cmd, g, "processor")
	if err != nil {
		return err
	}
	nc, js, err := connectJS(cmd, g, fmt.Sprintf("rdmawatch-processor-%d", o.instance),
		schemas.StreamCounters, schemas.StreamEvents, schemas.StreamDeadLetter)
	if err != nil {
		return err
	}
	defer nc.Close()
	partitions, err := natsutil.Partitions(cmd.Context(), js)
	if err != nil {
		return err
	}
	if o.instances > partitions {
		return fmt.Errorf("%w: stream %s: subject_transform: %d partitions cannot feed --instances %d (instances %d.. would own none); run `rdmawatch streams apply --partitions N` with N >= %d",
			natsutil.ErrStreamIncompatible, schemas.StreamCounters, partitions, o.instances, partitions, o.instances)
	}
	p, err := newProcessorRole(js, g, o, topo, partitions, settings)
	if err != nil {
		return err
	}
	tel.WatchNATS(nc)
	registerProcessorMetrics(tel.Registry(), p.Stats, partitions)
	tel.AddCheck("partitions", func(context.Context) error {
		if p.Stats().PartitionsOwned == 0 {
			return errors.New("owns no partition yet")
		}
		return nil
	})
	g.log.Info("processor started", "instance", o.instance, "instances", o.instances, "group", o.group, "partitions", partitions, "nats", natsURLForLog(g))
	err = p.Run(cmd.Context())
	st := p.Stats()
	g.log.Info("processor stopped", "reason", stopReason(cmd, err), "processed", st.Processed, "events", st.Events)
	return err
}

// newProcessorRole builds a member of --group, or instance --instance of
// --instances without one.
func newProcessorRole(js jetstream.JetStream, g *global, o processorFlags, topo *schemas.Topology, partitions int, settings processor.Settings) (processorRole, error) {
	cfg := engine.Config{
		ConfigureDetectors: settings.Apply,
		Partitions:         partitions,
		Topology:           topo,
		AllowedLateness:    o.lateness,
		WarmUp:             o.warmup,
		MaxPortsPerNode:    o.maxPortsPerNode,
	}
	if o.group != "" {
		cfg.Group, cfg.Member, cfg.MemberTTL = o.group, o.member, o.memberTTL
		return engine.NewElastic(js, cfg, g.log)
	}
	cfg.Instances, cfg.Instance = o.instances, o.instance
	return engine.New(js, cfg, g.log)
}
