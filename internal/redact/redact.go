// Package redact hides credentials in URLs and DSNs (and in any text that
// quotes them, such as an error message) before they are logged or printed.
// String is the one function every output uses: log lines (Handler), metric
// labels, dead-letter headers, JetStream consumer descriptions and
// `config print`.
package redact

import (
	"regexp"
	"strings"
)

// Mask replaces every hidden secret.
const Mask = "xxxxx"

// secretParam matches a query (or fragment) parameter whose value is a
// secret: a name that contains password, secret, token, signature,
// credential, session, jwt or hmac (clickhouse-go's ?password=, ?token=,
// ?access_token=, X-Amz-Signature, client_secret), or that ends in key, sig,
// pass, pwd, seed or auth (?key=, ?api_key=, Azure's ?sig=, ?nkey=). A few
// harmless parameters (?author=...) are masked too: hiding one value too
// many costs nothing, showing one secret does.
var secretParam = regexp.MustCompile(`(?i)([?&;#](?:[\w.~\-\[\]]*(?:password|passwd|secret|token|signature|credential|session|jwt|hmac)[\w.~\-\[\]]*|[\w.~\-\[\]]*(?:key|sig|pass|pwd|seed|auth))=)([^&;#\s"'\\` + "`" + `]*)`)

// String returns s with every secret a URL can carry replaced by Mask:
//   - the password of its userinfo (scheme://user:password@host keeps the
//     user; scheme://token@host, the way NATS takes a token, loses the whole
//     userinfo);
//   - the value of every secret query parameter (see secretParam);
//   - every path segment that looks like a token (TokenLike), as webhook
//     URLs carry theirs: Slack's /services/T…/B…/<secret>, Discord's
//     /api/webhooks/<id>/<secret>.
//
// s may be one URL, a comma-separated list of them (NATS) or a whole log
// line or error message. Text without credentials comes back unchanged, and
// String(String(s)) == String(s).
func String(s string) string {
	if !strings.Contains(s, "://") && !strings.Contains(s, "=") {
		return s
	}
	s = secretParam.ReplaceAllStringFunc(s, maskParam)
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
		// The URL ends at white space, a quote, or a comma that starts
		// another URL of a list; its userinfo at the last '@' before that,
		// so a password holding '@' or '/' is still covered.
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
		u := s[:end]
		s = s[end:]
		if at := strings.LastIndexByte(u, '@'); at >= 0 {
			userinfo := u[:at]
			if c := strings.IndexByte(userinfo, ':'); c >= 0 {
				b.WriteString(userinfo[:c+1])
			}
			b.WriteString(Mask)
			u = u[at:]
		}
		// The host ends where the path, query or fragment starts.
		h := strings.IndexAny(u, "/?#")
		if h < 0 {
			b.WriteString(u)
			continue
		}
		b.WriteString(u[:h])
		b.WriteString(maskPath(u[h:]))
	}
}

// maskParam masks the value of one secretParam match. In a list of URLs
// (a=http://h/x?token=T,http://h2/y?key=K) the value ends at the comma
// before the next URL, whose own parameters are masked in turn; any other
// comma is part of the value.
func maskParam(m string) string {
	eq := strings.IndexByte(m, '=')
	value := m[eq+1:]
	if j := strings.Index(value, "://"); j >= 0 {
		if k := strings.LastIndexByte(value[:j], ','); k >= 0 {
			return m[:eq+1] + Mask + secretParam.ReplaceAllStringFunc(value[k:], maskParam)
		}
	}
	return m[:eq+1] + Mask
}

// maskPath masks the token-like runs of a URL's path; p starts with the
// path, query or fragment. The query was handled by secretParam.
func maskPath(p string) string {
	q := strings.IndexAny(p, "?#")
	if q < 0 {
		q = len(p)
	}
	var b strings.Builder
	b.Grow(len(p))
	eachRun(p[:q], func(run string, token bool) {
		if token && TokenLike(run) {
			b.WriteString(Mask)
		} else {
			b.WriteString(run)
		}
	})
	b.WriteString(p[q:])
	return b.String()
}

// Tokens returns the runs of path that String masks: the secrets a URL
// path carries.
func Tokens(path string) []string {
	var out []string
	eachRun(path, func(run string, token bool) {
		if token && TokenLike(run) {
			out = append(out, run)
		}
	})
	return out
}

// eachRun cuts path into maximal runs of token characters and of other
// characters, in order. A token run is a segment, or the part of one before
// a quote escaped by a JSON log line (\"), a parenthesis or a dot.
func eachRun(path string, f func(run string, token bool)) {
	start := 0
	for i := 1; i <= len(path); i++ {
		if i == len(path) || tokenChar(path[i]) != tokenChar(path[start]) {
			f(path[start:i], tokenChar(path[start]))
			start = i
		}
	}
}

func tokenChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '_' || c == '-' || c == '~' || c == '+' || c == '=' || c == '%'
}

// minTokenLen is the shortest path segment taken for a token: shorter than
// any webhook secret (Slack's are 24 characters, Discord's 68), longer than
// the IDs beside them (Slack's T0123ABCD, 9).
const minTokenLen = 16

// TokenLike reports whether a path segment looks like a secret token: at
// least 16 token characters (letters, digits, _-~+=%) that mix letters with
// digits or upper with lower case, as random tokens do and words and
// version paths (api, v2, alerts, rdmawatch-incidents) do not.
func TokenLike(seg string) bool {
	if len(seg) < minTokenLen {
		return false
	}
	var lower, upper, digit bool
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case 'a' <= c && c <= 'z':
			lower = true
		case 'A' <= c && c <= 'Z':
			upper = true
		case '0' <= c && c <= '9':
			digit = true
		case tokenChar(c):
		default:
			return false
		}
	}
	return digit && (lower || upper) || lower && upper || digit && len(seg) >= 2*minTokenLen
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
