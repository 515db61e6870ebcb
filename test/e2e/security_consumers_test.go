package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/internal/natsutil"
	"github.com/rdmawatch/rdmawatch/internal/natsutil/natstest"
	"github.com/rdmawatch/rdmawatch/schemas"
)

// natsUser is one user of deploy/nats/rdmawatch-auth.conf and the inbox
// prefix its role connects with (natsutil.InboxPrefix, as cmd/rdmawatch
// gives it).
type natsUser struct {
	role, user, pw, inbox string
}

func shippedNATSUsers() []natsUser {
	return []natsUser{
		{"collector", "col-gpu-001", natsCollectorPW, natsutil.InboxPrefix(natsutil.RoleCollector, "gpu-001")},
		{"sim", "rdmawatch-sim", natsCollectorPW, natsutil.InboxPrefix(natsutil.RoleSim, "")},
		{"processor", "rdmawatch-processor", natsProcessorPW, natsutil.InboxPrefix(natsutil.RoleProcessor, "")},
		{"sink", "rdmawatch-sink", natsSinkPW, natsutil.InboxPrefix(natsutil.RoleSink, "")},
		{"alert", "rdmawatch-alert", natsAlertPW, natsutil.InboxPrefix(natsutil.RoleAlert, "")},
	}
}

// userConn is a connection as one user that records the permissions
// violations the server reports to it.
type userConn struct {
	t  *testing.T
	u  natsUser
	nc *nats.Conn
	js jetstream.JetStream

	mu         sync.Mutex
	violations []string
	changed    chan struct{}
}

// connectAs connects as u with inbox as its inbox prefix ("" for nats.go's
// _INBOX).
func connectAs(t *testing.T, url string, u natsUser, inbox string) *userConn {
	t.Helper()
	c := &userConn{t: t, u: u, changed: make(chan struct{}, 1)}
	opts := []nats.Option{
		nats.UserInfo(u.user, u.pw),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if !errors.Is(err, nats.ErrPermissionViolation) {
				return
			}
			c.mu.Lock()
			c.violations = append(c.violations, err.Error())
			c.mu.Unlock()
			select {
			case c.changed <- struct{}{}:
			default:
			}
		}),
	}
	if inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(inbox))
	}
	c.nc, c.js = natstest.Connect(t, url, opts...)
	return c
}

func (c *userConn) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.violations)
}

// violated waits up to d for a violation reported after mark whose text
// has want ("Publish to \"subject\"", "Subscription to \"subject\"").
func (c *userConn) violated(mark int, want string, d time.Duration) bool {
	deadline := time.After(d)
	for {
		c.mu.Lock()
		found := slices.ContainsFunc(c.violations[mark:], func(v string) bool { return strings.Contains(v, want) })
		c.mu.Unlock()
		if found {
			return true
		}
		select {
		case <-c.changed:
		case <-deadline:
			return false
		}
	}
}

// subscribeRefused subscribes to subject and reports whether the server
// refused the subscription.
func (c *userConn) subscribeRefused(subject string) bool {
	c.t.Helper()
	m := c.mark()
	sub, err := c.nc.SubscribeSync(subject)
	if err != nil {
		c.t.Fatalf("%s: subscribe %s: %v", c.u.user, subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.nc.Flush(); err != nil {
		c.t.Fatalf("%s: flush: %v", c.u.user, err)
	}
	return c.violated(m, "Subscription to "+strconv.Quote(subject), 2*time.Second)
}

// requestRefused publishes body to subject with a reply to the user's own
// inbox, and reports whether the server refused the publish; when it did
// not, what came back (an answer, or nothing, says the publish went
// through all the same).
func (c *userConn) requestRefused(subject string, body []byte) (bool, string) {
	c.t.Helper()
	inbox := c.nc.NewInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		c.t.Fatalf("%s: subscribe %s: %v", c.u.user, inbox, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	m := c.mark()
	if err := c.nc.PublishRequest(subject, inbox, body); err != nil {
		c.t.Fatalf("%s: publish %s: %v", c.u.user, subject, err)
	}
	if err := c.nc.Flush(); err != nil {
		c.t.Fatalf("%s: flush: %v", c.u.user, err)
	}
	if c.violated(m, "Publish to "+strconv.Quote(subject), 2*time.Second) {
		return true, ""
	}
	if msg, err := sub.NextMsg(200 * time.Millisecond); err == nil {
		return false, fmt.Sprintf("answered %q %s", msg.Header.Get("Status"), msg.Data)
	}
	return false, "no violation reported"
}

// TestSecurityInboxesPerRole: with the shipped users, each role receives
// replies on its own inbox prefix only: not on _INBOX.> (where it would
// read every other user's replies), not on another role's prefix, and a
// collector not on another node's.
func TestSecurityInboxesPerRole(t *testing.T) {
	const natsPort = 14572
	ns := securedNATS(t, natsPort)
	users := shippedNATSUsers()
	others := []string{
		"_INBOX.>", ">", "_INBOX_rdmawatch.>",
		natsutil.InboxPrefix(natsutil.RoleAdmin, "") + ".>",
		natsutil.InboxPrefix(natsutil.RoleReader, "") + ".>",
		natsutil.InboxPrefix(natsutil.RoleCollector, "gpu-002") + ".>",
		natsutil.InboxRoot + "." + natsutil.RoleCollector + ".*.>",
	}
	for _, u := range users {
		others = append(others, u.inbox+".>")
	}
	for _, u := range users {
		t.Run(u.role, func(t *testing.T) {
			own := connectAs(t, ns.URL, u, u.inbox)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := own.js.AccountInfo(ctx); err != nil {
				t.Errorf("%s with its inbox %s: account info: %v", u.user, u.inbox, err)
			}
			for _, s := range others {
				if s == u.inbox+".>" {
					continue
				}
				if !own.subscribeRefused(s) {
					t.Errorf("%s may subscribe to %s", u.user, s)
				}
			}
			if own.subscribeRefused(u.inbox + ".x") {
				t.Errorf("%s may not subscribe to its own inbox %s", u.user, u.inbox)
			}

			// nats.go's default inbox gets no reply: the role must use its own.
			def := connectAs(t, ns.URL, u, "")
			m := def.mark()
			c2, cancel2 := context.WithTimeout(context.Background(), time.Second)
			defer cancel2()
			if _, err := def.js.AccountInfo(c2); err == nil {
				t.Errorf("%s got a reply on _INBOX", u.user)
			}
			if !def.violated(m, `Subscription to "_INBOX.`, 2*time.Second) {
				t.Errorf("%s: no permissions violation for subscribing to _INBOX", u.user)
			}
		})
	}
}

// roleConsumer is a consumer a role made, and who made it.
type roleConsumer struct {
	owner, stream, name string
	// generated: the name is the client's random choice (ordered and
	// ephemeral consumers, KV watchers), not a fixed one.
	generated bool
}

func (v roleConsumer) String() string { return v.owner + "'s " + v.stream + "/" + v.name }

// TestSecurityConsumersPerRole: each role makes its consumers the way it
// does at run time, with its own user, and uses them (create, info, next,
// ack, delete); then every other user tries every consumer operation on
// them and is refused by the server, and every consumer is as its owner
// left it. The roles themselves run with these users in
// TestSecurityLeastPrivilege.
func TestSecurityConsumersPerRole(t *testing.T) {
	const natsPort = 14574
	ns := securedNATS(t, natsPort)
	ctx := ctxT(t, 3*time.Minute)
	mustRun(t, []string{natsAs(natsPort, "rdmawatch-admin", natsAdminPW)}, "streams", "apply")
	ajs := adminJS(t, ns.URL, nats.UserInfo("rdmawatch-admin", natsAdminPW))
	// Something on every stream to fetch and ack.
	for subj, n := range map[string]int{
		schemas.CountersSubject("gpu-001"):                             3,
		schemas.InventorySubject("gpu-001"):                            3,
		"rdmawatch.events.link_flap.gpu-001":                           3,
		schemas.DeadLetterSubject("processor", schemas.StreamCounters): 1,
		schemas.DeadLetterSubject("sink", schemas.StreamCounters):      1,
		schemas.DeadLetterSubject("alert", schemas.StreamEvents):       1,
	} {
		for i := range n {
			if _, err := ajs.Publish(ctx, subj, []byte(strconv.Itoa(i))); err != nil {
				t.Fatalf("admin publish %s: %v", subj, err)
			}
		}
	}

	conns := map[string]*userConn{}
	for _, u := range shippedNATSUsers() {
		conns[u.role] = connectAs(t, ns.URL, u, u.inbox)
	}
	var victims []roleConsumer

	// The sink: its four durables (sink.go, config_rows.go), read whole.
	sink := conns["sink"]
	for _, c := range []struct{ stream, name string }{
		{schemas.StreamCounters, "rdmawatch-sink-counters"},
		{schemas.StreamEvents, "rdmawatch-sink-events"},
		{schemas.StreamInventory, "rdmawatch-sink-inventory"},
		{schemas.StreamInventory, "rdmawatch-sink-config"},
	} {
		cons, err := sink.js.CreateOrUpdateConsumer(ctx, c.stream, jetstream.ConsumerConfig{
			Durable: c.name, DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: time.Minute, MaxDeliver: -1,
		})
		if err != nil {
			t.Fatalf("sink: its consumer %s on %s: %v", c.name, c.stream, err)
		}
		fetchOwn(t, "sink", cons, true, true)
		victims = append(victims, roleConsumer{owner: "sink", stream: c.stream, name: c.name})
	}

	// The alert bridge: a durable per target, named after it
	// (alert.consumerName), and an ordered consumer for the open incidents.
	alert := conns["alert"]
	h := fnv.New64a()
	h.Write([]byte("http://127.0.0.1:14575/hook"))
	alertDurable := fmt.Sprintf("rdmawatch-alert-wh-%016x", h.Sum64())
	acons, err := alert.js.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{
		Durable: alertDurable, DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckExplicitPolicy,
		MaxAckPending: 1, AckWait: time.Minute, FilterSubject: schemas.EventsAllFilter,
	})
	if err != nil {
		t.Fatalf("alert: its consumer %s: %v", alertDurable, err)
	}
	fetchOwn(t, "alert", acons, true, true)
	victims = append(victims, roleConsumer{owner: "alert", stream: schemas.StreamEvents, name: alertDurable})
	aord, err := alert.js.OrderedConsumer(ctx, schemas.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{schemas.EventsAllFilter}, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		t.Fatalf("alert: its ordered consumer: %v", err)
	}
	fetchOwn(t, "alert", aord, false, true)
	victims = append(victims, roleConsumer{owner: "alert", stream: schemas.StreamEvents, name: aord.CachedInfo().Name, generated: true})

	// The processor: ordered consumers on counters, events and its dead
	// letters, an ephemeral one on inventory, and --group's KV watcher.
	proc := conns["processor"]
	for _, c := range []struct{ stream, filter string }{
		{schemas.StreamCounters, ""},
		{schemas.StreamEvents, schemas.EventsAllFilter},
		{schemas.StreamDeadLetter, schemas.DeadLetterSubject("processor", schemas.StreamCounters)},
	} {
		occ := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
		if c.filter != "" {
			occ.FilterSubjects = []string{c.filter}
		}
		cons, err := proc.js.OrderedConsumer(ctx, c.stream, occ)
		if err != nil {
			t.Fatalf("processor: its ordered consumer on %s: %v", c.stream, err)
		}
		fetchOwn(t, "processor", cons, false, true)
		victims = append(victims, roleConsumer{owner: "processor", stream: c.stream, name: cons.CachedInfo().Name, generated: true})
	}
	inv, err := proc.js.CreateConsumer(ctx, schemas.StreamInventory, jetstream.ConsumerConfig{
		AckPolicy: jetstream.AckNonePolicy, FilterSubject: schemas.InventoryAllFilter,
		InactiveThreshold: time.Minute, MemoryStorage: true,
	})
	if err != nil {
		t.Fatalf("processor: its inventory consumer: %v", err)
	}
	fetchOwn(t, "processor", inv, false, false) // it never asks for this one's info
	victims = append(victims, roleConsumer{owner: "processor", stream: schemas.StreamInventory, name: inv.CachedInfo().Name, generated: true})
	// An ordered consumer deletes the consumer it replaces.
	gone, err := proc.js.CreateConsumer(ctx, schemas.StreamCounters, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true})
	if err != nil {
		t.Fatalf("processor: a consumer on %s: %v", schemas.StreamCounters, err)
	}
	if err := proc.js.DeleteConsumer(ctx, schemas.StreamCounters, gone.CachedInfo().Name); err != nil {
		t.Errorf("processor: deleting its own consumer: %v", err)
	}
	kv, err := proc.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "rdmawatch_processors", History: 1, TTL: time.Minute})
	if err != nil {
		t.Fatalf("processor: the group's bucket: %v", err)
	}
	if _, err := kv.Put(ctx, "least-privilege.member-1", []byte("x")); err != nil {
		t.Fatalf("processor: heartbeat: %v", err)
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		t.Fatalf("processor: watching the group: %v", err)
	}
	defer func() { _ = w.Stop() }()
	if e := <-w.Updates(); e == nil || e.Key() != "least-privilege.member-1" {
		t.Fatalf("processor: watching the group: got %v", e)
	}
	kvStream := "KV_rdmawatch_processors"
	kvNames := consumerNames(t, ctx, ajs, kvStream)
	if len(kvNames) != 1 {
		t.Fatalf("consumers on %s: %v, want the processor's watcher", kvStream, kvNames)
	}
	victims = append(victims, roleConsumer{owner: "processor", stream: kvStream, name: kvNames[0], generated: true})

	// Every consumer on the streams is one of the above.
	for _, s := range []string{schemas.StreamCounters, schemas.StreamEvents, schemas.StreamInventory, schemas.StreamDeadLetter} {
		for _, n := range consumerNames(t, ctx, ajs, s) {
			if !slices.ContainsFunc(victims, func(v roleConsumer) bool { return v.stream == s && v.name == n }) {
				t.Errorf("consumer %s/%s made by no role of this test", s, n)
			}
		}
	}
	before := consumerStates(t, ctx, ajs, victims)

	// What nobody but the owner may do to a consumer.
	ops := func(v roleConsumer) map[string]struct {
		subject string
		body    []byte
	} {
		cfg := func(filter string) []byte {
			b, _ := json.Marshal(map[string]any{"stream_name": v.stream, "config": jetstream.ConsumerConfig{
				Name: v.name, Durable: v.name, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: filter,
			}})
			return b
		}
		api := "$JS.API.CONSUMER."
		repoint := map[string]string{
			schemas.StreamCounters: schemas.CountersPartitionFilter(1), schemas.StreamEvents: "rdmawatch.events.x.>",
			schemas.StreamInventory: schemas.InventorySubject("gpu-x"), schemas.StreamDeadLetter: "rdmawatch.deadletter.x.>",
			kvStream: "$KV.rdmawatch_processors.x",
		}[v.stream]
		return map[string]struct {
			subject string
			body    []byte
		}{
			"create or update": {api + "CREATE." + v.stream + "." + v.name, cfg("")},
			"re-point":         {api + "CREATE." + v.stream + "." + v.name + "." + repoint, cfg(repoint)},
			"durable create":   {api + "DURABLE.CREATE." + v.stream + "." + v.name, cfg("")},
			"create unnamed":   {api + "CREATE." + v.stream, cfg("")},
			"info":             {api + "INFO." + v.stream + "." + v.name, nil},
			"next":             {api + "MSG.NEXT." + v.stream + "." + v.name, []byte(`{"batch":1,"no_wait":true}`)},
			"ack":              {fmt.Sprintf("$JS.ACK.%s.%s.1.1.1.%d.0", v.stream, v.name, time.Now().UnixNano()), []byte("+ACK")},
			"pause":            {api + "PAUSE." + v.stream + "." + v.name, []byte(`{"pause_until":"2099-01-01T00:00:00Z"}`)},
			"delete":           {api + "DELETE." + v.stream + "." + v.name, nil},
		}
	}
	for _, u := range shippedNATSUsers() {
		c := conns[u.role]
		for _, v := range victims {
			if v.owner == u.role || reachableByName(u.role, v) {
				continue
			}
			for op, o := range ops(v) {
				if ok, got := c.requestRefused(o.subject, o.body); !ok {
					t.Errorf("%s: %s of %s (%s) not refused: %s", u.user, op, v, o.subject, got)
				}
			}
		}
		// Nor may it learn the names of the consumers.
		for _, s := range []string{schemas.StreamCounters, schemas.StreamEvents, schemas.StreamInventory, schemas.StreamDeadLetter, kvStream} {
			for _, subj := range []string{"$JS.API.CONSUMER.NAMES." + s, "$JS.API.CONSUMER.LIST." + s} {
				if ok, got := c.requestRefused(subj, nil); !ok {
					t.Errorf("%s: listing the consumers (%s) not refused: %s", u.user, subj, got)
				}
			}
		}
		if !c.subscribeRefused("$JS.EVENT.>") {
			t.Errorf("%s may read JetStream's advisories ($JS.EVENT.>)", u.user)
		}
	}
	if after := consumerStates(t, ctx, ajs, victims); !slices.Equal(before, after) {
		t.Errorf("consumers changed by other users:\nbefore %q\nafter  %q", before, after)
	}
}

// reachableByName says which consumers a role can reach if it learns their
// names: on the events stream, the processor and the alert bridge make
// consumers of client-chosen names (random for ordered consumers, the
// target's name hashed for the bridge's durables), which no subject
// permission can tell apart (deploy/nats/rdmawatch-auth.conf says why).
// The random names cannot be learnt (listing, advisories and other inboxes
// are refused, checked above); the processor writes the events anyway.
func reachableByName(role string, v roleConsumer) bool {
	both := func(r string) bool { return r == "processor" || r == "alert" }
	return v.stream == schemas.StreamEvents && both(role) && both(v.owner)
}

// fetchOwn fetches a message from the role's own consumer, acks it when
// the consumer takes acks, and asks for the consumer's info if the role
// does that.
func fetchOwn(t *testing.T, role string, cons jetstream.Consumer, ack, info bool) {
	t.Helper()
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatalf("%s: fetch from its consumer: %v", role, err)
	}
	n := 0
	for m := range batch.Messages() {
		n++
		if ack {
			if err := m.DoubleAck(context.Background()); err != nil {
				t.Errorf("%s: ack on its consumer: %v", role, err)
			}
		}
	}
	if err := batch.Error(); err != nil || n == 0 {
		t.Fatalf("%s: fetch from its consumer: %d messages, %v", role, n, err)
	}
	if !info {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cons.Info(ctx); err != nil {
		t.Errorf("%s: info of its consumer: %v", role, err)
	}
}

func mustStream(t *testing.T, ctx context.Context, js jetstream.JetStream, name string) jetstream.Stream {
	t.Helper()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	return s
}

func consumerNames(t *testing.T, ctx context.Context, js jetstream.JetStream, stream string) []string {
	t.Helper()
	l := mustStream(t, ctx, js, stream).ConsumerNames(ctx)
	var names []string
	for n := range l.Name() {
		names = append(names, n)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("consumers of %s: %v", stream, err)
	}
	slices.Sort(names)
	return names
}

// consumerStates says, for each consumer, what another user's meddling
// would change: its filter, what it delivered, what was acked. (Asked on
// the wire: jetstream.Consumer does not open push consumers, the KV
// watcher.)
func consumerStates(t *testing.T, ctx context.Context, js jetstream.JetStream, vs []roleConsumer) []string {
	t.Helper()
	var out []string
	for _, v := range vs {
		msg, err := js.Conn().RequestWithContext(ctx, "$JS.API.CONSUMER.INFO."+v.stream+"."+v.name, nil)
		var i struct {
			jetstream.ConsumerInfo
			Error *jetstream.APIError `json:"error"`
		}
		if err == nil {
			err = json.Unmarshal(msg.Data, &i)
		}
		if err == nil && i.Error != nil {
			err = i.Error
		}
		if err != nil {
			t.Errorf("%s: %v", v, err)
			out = append(out, v.String()+" gone")
			continue
		}
		out = append(out, fmt.Sprintf("%s filter=%q%q paused=%v delivered=%d acked=%d pending=%d",
			v, i.Config.FilterSubject, i.Config.FilterSubjects, i.Paused, i.Delivered.Consumer, i.AckFloor.Consumer, i.NumAckPending))
	}
	return out
}
