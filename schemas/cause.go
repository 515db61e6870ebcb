package schemas

// Event types of the transport and application layers (docs/formats.md, types by
// layer).
const (
	TypeRetransmissions   = "retransmissions"
	TypeReceiveStarvation = "receive_starvation"
	TypeCompletionErrors  = "completion_errors"
)

// Cause names the incident that, by the counters, explains an event's
// incident: its id, type and subject (docs/formats.md, events: `cause`).
type Cause struct {
	ID      string  `json:"id" msgpack:"id"`
	Type    string  `json:"type" msgpack:"type"`
	Subject Subject `json:"subject" msgpack:"subject"`
}

// LabelCause is the root-cause incident a label says should explain it:
// its type and subject (docs/formats.md, labels: `cause`).
type LabelCause struct {
	Type    string  `json:"type"`
	Subject Subject `json:"subject"`
}
