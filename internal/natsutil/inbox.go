package natsutil

import (
	"fmt"
	"strings"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// InboxRoot begins the inbox prefix of every rdmawatch connection
// (InboxPrefix). It is not nats.go's "_INBOX": a user allowed to subscribe
// to _INBOX.> receives every other user's replies (publish acks, stream and
// consumer info with the consumers' names and configurations, the messages
// they pull), so no rdmawatch user is allowed that.
const InboxRoot = "_INBOX_rdmawatch"

// The roles an inbox prefix names, one per user of
// deploy/nats/rdmawatch-auth.conf.
const (
	RoleCollector = "collector" // one host's collector, per node
	RoleSim       = "sim"       // collector --source sim: a simulated fleet from one process
	RoleProcessor = "processor"
	RoleSink      = "sink"
	RoleAlert     = "alert"
	RoleReader    = "reader" // events tail
	RoleAdmin     = "admin"  // streams apply|check
)

// InboxPrefix is the inbox prefix of role's connections: InboxRoot.<role>,
// and InboxRoot.collector.<node> for a collector, the node as the token its
// subjects carry (schemas.SubjectToken), so that with one user per node a
// collector may receive its own replies only. node is ignored for the
// other roles. deploy/nats/rdmawatch-auth.conf allows each user to
// subscribe to <its prefix>.> and nothing else of the inboxes.
func InboxPrefix(role, node string) string {
	p := InboxRoot + "." + schemas.SubjectToken(role)
	if role == RoleCollector {
		p += "." + schemas.SubjectToken(node)
	}
	return p
}

// checkInboxPrefix refuses what nats.go would refuse with an error that
// does not say which prefix ("nats: invalid custom prefix"), and white
// space, which makes no subject.
func checkInboxPrefix(p string) error {
	if p == "" || strings.ContainsAny(p, "*> \t\r\n") || strings.HasPrefix(p, ".") ||
		strings.HasSuffix(p, ".") || strings.Contains(p, "..") {
		return fmt.Errorf("nats inbox prefix %q: want dot-separated subject tokens without wildcards or white space", p)
	}
	return nil
}
