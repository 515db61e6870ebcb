package deadletter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rdmawatch/rdmawatch/schemas"
)

// Target is the subject a dead letter from stream, stored there under
// subject, is published to again. It must be a subject of that stream, and
// stream one of rdmawatch's data streams (DataStreams): a letter whose
// headers name anything else (a hand-made or forged one) is refused rather
// than published wherever it points.
//
// A stream that rewrites its subjects (the counters stream's partition
// transform, rdmawatch.counters.<node> stored as
// rdmawatch.counters.<partition>.<node>) stores the rewritten subject,
// which no stream listens on: the letter goes back to the subject as
// published, and the transform picks the partition anew (the partition
// count may have changed since).
func Target(stream, subject string) (string, error) {
	var cfg jetstream.StreamConfig
	var names []string
	for _, c := range DataStreams() {
		if c.Name == stream {
			cfg = c
		}
		names = append(names, c.Name)
	}
	if cfg.Name == "" {
		return "", fmt.Errorf("stream %q is not one of rdmawatch's streams (%s): not redriven", stream, strings.Join(names, ", "))
	}
	if err := checkLiteral(subject); err != nil {
		return "", err
	}
	target := subject
	if tr := cfg.SubjectTransform; tr != nil && strings.HasSuffix(tr.Source, ".*") && strings.Count(tr.Source, "*") == 1 {
		prefix := strings.TrimSuffix(tr.Source, "*")
		if rest, ok := strings.CutPrefix(subject, prefix); ok {
			if part, tok, ok := strings.Cut(rest, "."); ok && isDecimal(part) {
				target = prefix + tok
			}
		}
	}
	for _, f := range cfg.Subjects {
		if subjectMatches(f, target) {
			return target, nil
		}
	}
	return "", fmt.Errorf("subject %q is not one of stream %s's subjects (%s): not redriven", subject, stream, strings.Join(cfg.Subjects, ", "))
}

// checkLiteral refuses what is not one subject to publish to: empty
// tokens, wildcards, white space and control characters.
func checkLiteral(s string) error {
	if s == "" {
		return errors.New("no original subject (header " + schemas.HeaderDeadSubject + "): not redriven")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f || c == '*' || c == '>' {
			return fmt.Errorf("subject %q: not one literal subject (wildcard, white space or control character at byte %d): not redriven", s, i)
		}
	}
	if strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") || strings.Contains(s, "..") {
		return fmt.Errorf("subject %q: empty token: not redriven", s)
	}
	return nil
}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// subjectMatches reports whether the literal subject s matches filter,
// with NATS wildcards: '*' one token, '>' one or more at the end.
func subjectMatches(filter, s string) bool {
	ft, st := strings.Split(filter, "."), strings.Split(s, ".")
	for i, f := range ft {
		if f == ">" {
			return len(st) > i
		}
		if i >= len(st) || f != "*" && f != st[i] {
			return false
		}
	}
	return len(ft) == len(st)
}

// MsgID is the Nats-Msg-Id of a redriven copy: the original's stream and
// sequence, so redriving it twice within the stream's duplicate window
// (10 minutes) stores one copy, even when two roles refused the same
// message and both their letters are redriven; the copy reaches every
// consumer of the stream anyway. A letter without its original sequence is
// named by its own.
func MsgID(l Letter) string {
	if l.StreamSeq == 0 {
		return "redrive/" + schemas.StreamDeadLetter + "/" + strconv.FormatUint(l.Seq, 10)
	}
	return "redrive/" + l.Stream + "/" + strconv.FormatUint(l.StreamSeq, 10)
}

// Outcome is what Redrive did with one dead letter.
type Outcome struct {
	Letter Letter
	// Target is the subject the payload went (dry run: would go) to, and
	// MsgID its Nats-Msg-Id.
	Target, MsgID string
	// Stored is the copy's sequence in Letter.Stream. Duplicate: the
	// stream already held a copy with MsgID (an earlier redrive whose
	// delete did not happen), so nothing new was stored.
	Stored    uint64
	Duplicate bool
	// Deleted: the dead letter is gone (deleted here, or by a redrive
	// running at the same time).
	Deleted bool
}

// Redrive publishes dead letter seq's payload, untouched, to its original
// subject (Target) and, once the stream has acknowledged it, deletes the
// letter. A letter whose publish fails stays, and a repeat within the
// duplicate window does not store it twice (MsgID). With dryRun it only
// checks and says what it would do.
func (r *Reader) Redrive(ctx context.Context, seq uint64, dryRun bool) (Outcome, error) {
	l, err := r.Get(ctx, seq)
	if err != nil {
		return Outcome{}, err
	}
	o := Outcome{Letter: l, MsgID: MsgID(l)}
	if o.Target, err = Target(l.Stream, l.Subject); err != nil {
		return o, fmt.Errorf("dead letter %d: %w", seq, err)
	}
	if dryRun {
		return o, nil
	}
	msg := nats.NewMsg(o.Target)
	msg.Data = l.Data
	msg.Header.Set(jetstream.MsgIDHeader, o.MsgID)
	// The server checks the copy lands in the letter's own stream: a
	// subject some other stream also listens on is refused, not stored
	// there.
	ack, err := r.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(l.Stream))
	if err != nil {
		return o, fmt.Errorf("dead letter %d: publish to %s (stream %s): %w; the dead letter is kept", seq, o.Target, l.Stream, err)
	}
	o.Stored, o.Duplicate = ack.Sequence, ack.Duplicate
	if err := r.str.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return o, fmt.Errorf("dead letter %d: published to %s (%s seq %d) but not deleted: %w; a redrive again within the duplicate window stores no second copy", seq, o.Target, l.Stream, ack.Sequence, err)
	}
	o.Deleted = true
	return o, nil
}
