package redact

import (
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://col-a:COLAPW@10.0.0.1:4222", "nats://col-a:xxxxx@10.0.0.1:4222"},
		{"nats=nats://col-a:COLAPW@h:4222 node=gpu-1", "nats=nats://col-a:xxxxx@h:4222 node=gpu-1"},
		{"nats://a:p1@h1:4222,nats://b:p2@h2:4222", "nats://a:xxxxx@h1:4222,nats://b:xxxxx@h2:4222"},
		{"nats://s3cr3tt0ken@h:4222", "nats://xxxxx@h:4222"},
		{"clickhouse://sink:pw@h1:9000,h2:9000/rdmawatch?secure=true", "clickhouse://sink:xxxxx@h1:9000,h2:9000/rdmawatch?secure=true"},
		{"clickhouse://h:9000/db?username=sink&password=PW&secure=true", "clickhouse://h:9000/db?username=sink&password=xxxxx&secure=true"},
		{"clickhouse://u:p@ss/w@rd@h:9000/db", "clickhouse://u:xxxxx@h:9000/db"},
		{`open "clickhouse://u:PW@h:9000/db": refused`, `open "clickhouse://u:xxxxx@h:9000/db": refused`},
		{"tls://h:4222 user@example.com", "tls://h:4222 user@example.com"},
		{"plain text, no url", "plain text, no url"},
		{"x ?Token=abc&b=1", "x ?Token=xxxxx&b=1"},
	}
	for _, tt := range tests {
		if got := String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestError(t *testing.T) {
	err := Error(&url.Error{Op: "dial", URL: "nats://u:PW@h", Err: io.EOF})
	if strings.Contains(err.Error(), "PW") || !errors.Is(err, io.EOF) {
		t.Errorf("Error() = %q, Is(EOF) = %v", err, errors.Is(err, io.EOF))
	}
	if Error(nil) != nil {
		t.Error("Error(nil) != nil")
	}
}

// FuzzString: whatever the user, password and host, the output does not
// depend on the password, in userinfo or as ?password=, alone, in a list or
// inside a sentence: it cannot leak any of it.
func FuzzString(f *testing.F) {
	f.Add("col-a", "COLAPW", "10.0.0.1:4222", "nats")
	f.Add("sink", "p@ss/w:rd?x=1", "h1:9000", "clickhouse")
	f.Add("", "tok", "h", "tls")
	f.Add("u", "%41%", "[::1]:9000", "clickhouse")
	f.Fuzz(func(t *testing.T, user, password, host, scheme string) {
		if scheme == "" || strings.ContainsAny(scheme, ":/@?#%,&;= \t\r\n\"'`<>") ||
			strings.ContainsAny(host, "@/?#,&;= \t\r\n\"'`<>%") || strings.Contains(user+host, "://") {
			return
		}
		forms := func(pw string) []string {
			u := url.URL{Scheme: scheme, User: url.UserPassword(user, pw), Host: host, Path: "/db"}
			q := url.URL{Scheme: scheme, Host: host, Path: "/db", RawQuery: "secure=true&password=" + url.QueryEscape(pw)}
			return []string{
				u.String(),
				q.String(),
				u.String() + "," + u.String(),
				"connect to " + u.String() + ": refused; dsn " + q.String(),
			}
		}
		with, other := forms(password), forms("OTHER-PASSWORD")
		for i := range with {
			got := String(with[i])
			if want := String(other[i]); got != want {
				t.Fatalf("String(%q) = %q depends on the password: with another one %q", with[i], got, want)
			}
			if String(got) != got {
				t.Fatalf("not idempotent: %q -> %q -> %q", with[i], got, String(got))
			}
		}
	})
}
