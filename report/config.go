package report

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
)

// PortConfig is one row of a port's configuration history around an
// incident (the config_history query): the settings in force at the
// onset, or a change within the incident. Settings are as the query shows
// them: "unknown" when the host did not expose one.
type PortConfig struct {
	Since, SeenUntil               time.Time
	Netdev, MTU, PFC, ECNNP, ECNRP string
	Trust                          string
	Change                         string // "in force at --from", "first seen" or what changed
	AtOnset                        bool
	ChangedDuring                  bool
}

// codeUnknownTable is ClickHouse's UNKNOWN_TABLE: a database migrated
// before port_config existed.
const codeUnknownTable = 60

// portConfig reads what the incident's port was configured with at the
// onset and every change until its end (or last detection).
func portConfig(ctx context.Context, conn chdb.Conn, inc *Incident) error {
	from := time.UnixMilli(inc.StartMs).UTC()
	to := time.UnixMilli(max(inc.end(), inc.StartMs)).UTC().Truncate(time.Second).Add(time.Second)
	res, err := Run(ctx, conn, "config_history", Params{From: from, To: to, Node: inc.Node, Device: inc.Device, Port: int(inc.Port)})
	var exc *ch.Exception
	if errors.As(err, &exc) && exc.Code == codeUnknownTable {
		return nil // no port_config table yet: nothing recorded
	}
	if err != nil {
		return fmt.Errorf("postmortem: configuration of %s/%s/%d: %w", inc.Node, inc.Device, inc.Port, err)
	}
	col := func(row []any, name string) any {
		if i := res.Column(name); i >= 0 {
			return deref(row[i])
		}
		return nil
	}
	str := func(row []any, name string) string { s, _ := col(row, name).(string); return s }
	tm := func(row []any, name string) time.Time { t, _ := col(row, name).(time.Time); return t.UTC() }
	for _, row := range res.Rows {
		c := PortConfig{
			Since: tm(row, "since"), SeenUntil: tm(row, "seen_until"),
			Netdev: str(row, "netdev"), MTU: str(row, "mtu"), PFC: str(row, "pfc_enabled"),
			ECNNP: str(row, "ecn_np_enabled"), ECNRP: str(row, "ecn_rp_enabled"), Trust: str(row, "trust"),
			Change: str(row, "change"),
		}
		c.AtOnset = c.Change == "in force at --from"
		c.ChangedDuring = !c.AtOnset
		inc.Config = append(inc.Config, c)
	}
	return nil
}

// configMarkdown is the report's section on the incident's port
// configuration: "look at the counters first, then touch the
// configuration", so what it was then, and whether it moved.
func configMarkdown(inc Incident) string {
	if inc.Device == "" {
		return ""
	}
	var b strings.Builder
	if len(inc.Config) == 0 {
		fmt.Fprintf(&b, "\nNo configuration of %s is recorded for this time (an InfiniBand port, a host that exposes none, or a collector that does not read it).\n", subject(inc))
		return b.String()
	}
	var onset *PortConfig
	var during []PortConfig
	for i := range inc.Config {
		if inc.Config[i].AtOnset {
			onset = &inc.Config[i]
		} else {
			during = append(during, inc.Config[i])
		}
	}
	if onset != nil {
		fmt.Fprintf(&b, "\nConfiguration of %s (netdev %s) at the onset, in force since %s: mtu %s, PFC on %s, ECN notification point on %s, reaction point on %s, trust %s.\n",
			subject(inc), onset.Netdev, onset.Since.Format("2006-01-02 15:04:05Z"), onset.MTU, prioWords(onset.PFC), prioWords(onset.ECNNP), prioWords(onset.ECNRP), onset.Trust)
	} else {
		fmt.Fprintf(&b, "\nNo configuration of %s was recorded before the onset.\n", subject(inc))
	}
	if len(during) == 0 {
		b.WriteString("It did not change during the incident.\n")
		return b.String()
	}
	b.WriteString("\nConfiguration changes during the incident:\n\n| time | change | mtu | PFC | ECN NP | ECN RP | trust |\n|---|---|---|---|---|---|---|\n")
	for _, c := range during {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", c.Since.Format("2006-01-02 15:04:05Z"), cell(c.Change), c.MTU, c.PFC, c.ECNNP, c.ECNRP, c.Trust)
	}
	return b.String()
}

// prioWords says a known empty priority list in words: "on []" reads like
// a typo.
func prioWords(s string) string {
	if s == "[]" {
		return "no priority"
	}
	return s
}
