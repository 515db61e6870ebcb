package alert

import (
	"fmt"
	"hash/fnv"
	"net/url"
	"regexp"
	"strings"

	"github.com/rdmawatch/rdmawatch/internal/redact"
)

// Target is one place incidents go, as the operator gave it: "name=URL" or a
// bare URL. The name is what every output shows (logs, metric labels, dead
// letters, the consumer's name and description); the URL, which may carry a
// token or a password, is used to send and nowhere else.
type Target struct {
	// Name is the operator's label, or for a bare URL its scheme, host and
	// path with every secret masked (DerivedName): either way it stays the
	// same when only the credentials change.
	Name string
	// Named is true when the operator gave the name.
	Named bool
	URL   string
}

// targetName is what an operator may call a target: it becomes part of a
// JetStream consumer name and a metric label, so letters, digits, '-' and
// '_' only.
var targetName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// ParseTarget reads "name=URL" or a bare URL. A '=' before the URL's
// "://" separates a name; one after it belongs to the URL's query. Errors
// show the spec with its secrets masked.
func ParseTarget(spec string) (Target, error) {
	spec = strings.TrimSpace(spec)
	t := Target{URL: spec}
	if i, j := strings.IndexByte(spec, '='), strings.Index(spec, "://"); i >= 0 && (j < 0 || i < j) {
		t.Name, t.URL, t.Named = strings.TrimSpace(spec[:i]), strings.TrimSpace(spec[i+1:]), true
		if !targetName.MatchString(t.Name) {
			return Target{}, fmt.Errorf("target %q: name %q: want 1-64 letters, digits, '-' or '_', starting with a letter or digit", redact.String(spec), t.Name)
		}
	}
	u, err := checkURL(t.URL)
	if err != nil {
		return Target{}, err
	}
	if !t.Named {
		t.Name = DerivedName(u)
	}
	return t, nil
}

// checkURL accepts absolute http(s) URLs only; the error shows the URL
// without any secret it carries.
func checkURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("target URL %q does not parse as a URL", redact.String(s))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("target URL %q: want http(s)://host[:port]/path", redact.String(u.Redacted()))
	}
	return u, nil
}

// DerivedName names a target given by a bare URL: its scheme, host and path,
// without userinfo, query or fragment and with token-like path segments
// masked, so the name neither shows a secret nor changes when one rotates.
// A URL without credentials is its own name.
func DerivedName(u *url.URL) string {
	n := url.URL{Scheme: u.Scheme, Host: strings.ToLower(u.Host), Path: u.Path, RawPath: u.RawPath}
	return redact.String(n.String())
}

// consumerName is the durable consumer of a target: stable for its name, so
// a restarted bridge resumes where it stopped and a rotated token keeps the
// consumer. A given name is used as it is (it is valid in a consumer name);
// a derived one is hashed, which for a URL without credentials is the hash
// of the URL, the name earlier versions gave its consumer.
func consumerName(prefix, kind string, t Target) string {
	if t.Named {
		return fmt.Sprintf("%s-%s-%s", prefix, kind, t.Name)
	}
	h := fnv.New64a()
	h.Write([]byte(t.Name))
	return fmt.Sprintf("%s-%s-%016x", prefix, kind, h.Sum64())
}

// secretsOf lists the secrets a URL carries (userinfo, secret query values,
// token-like path segments) in the forms a receiver may echo them, so an
// answer that quotes its request path without the scheme ("no route for
// /services/T0/B0/<token>") is scrubbed too.
func secretsOf(u *url.URL) []string {
	var out []string
	add := func(s string) {
		if len(s) >= 4 {
			out = append(out, s)
			if e := url.PathEscape(s); e != s {
				out = append(out, e)
			}
		}
	}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok {
			add(pw)
		} else {
			add(u.User.Username()) // a token as the whole userinfo
		}
	}
	for k, vs := range u.Query() {
		if redact.String("?"+k+"=v") == "?"+k+"=v" {
			continue
		}
		for _, v := range vs {
			add(v)
		}
	}
	for _, tok := range redact.Tokens(u.EscapedPath()) {
		add(tok)
		if un, err := url.PathUnescape(tok); err == nil {
			add(un)
		}
	}
	return out
}

// scrub is redact.String, then every known secret of the targets masked
// wherever it stands.
func scrub(s string, secrets []string) string {
	s = redact.String(s)
	for _, sec := range secrets {
		s = strings.ReplaceAll(s, sec, redact.Mask)
	}
	return s
}
