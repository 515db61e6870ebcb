// Package redact hides credentials in URLs and DSNs (and in any text that
// quotes them, such as an error message) before they are logged or printed.
package redact

import (
	"regexp"
	"strings"
)

// Mask replaces every hidden secret.
const Mask = "xxxxx"

// secretParam matches a query parameter whose value is a secret, e.g.
// clickhouse-go's ?password= or a ?token=.
var secretParam = regexp.MustCompile(`(?i)([?&;](?:password|passwd|pass|pwd|secret|token|auth_token|access_token|api_key|apikey|key|nkey|seed|credentials)=)([^&;\s"'` + "`" + `]*)`)

// String returns s with the password of every URL's userinfo
// (scheme://user:password@host keeps the user; scheme://token@host, the way
// NATS takes a token, loses the whole userinfo) and every secret query
// parameter replaced by Mask. s may be one URL, a comma-separated list of
// them (NATS) or a whole log line or error message. Text without
// credentials comes back unchanged.
func String(s string) string {
	if !strings.Contains(s, "://") && !strings.Contains(s, "=") {
		return s
	}
	s = secretParam.ReplaceAllString(s, "${1}"+Mask)
	if !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+3])
		s = s[i+3:]
		// The authority ends at white space, a quote, or a comma that
		// starts another URL of a list; its userinfo at the last '@'
		// before that, so a password holding '@' or '/' is still covered.
		end := strings.IndexAny(s, " \t\r\n\"'`<>")
		if end < 0 {
			end = len(s)
		}
		if j := strings.Index(s[:end], "://"); j >= 0 {
			// Another URL in the same token (a list such as
			// nats://a:p@h1,nats://b:q@h2): stop at the comma before it.
			if k := strings.LastIndexByte(s[:j], ','); k >= 0 {
				end = k
			}
		}
		at := strings.LastIndexByte(s[:end], '@')
		if at < 0 {
			continue
		}
		userinfo := s[:at]
		if c := strings.IndexByte(userinfo, ':'); c >= 0 {
			b.WriteString(userinfo[:c+1])
		}
		b.WriteString(Mask)
		s = s[at:]
	}
}

// Error is err with String applied to its message; errors.Is and errors.As
// still see err. A nil err stays nil.
func Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if red := String(msg); red != msg {
		return &redacted{msg: red, err: err}
	}
	return err
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }
