package redact

import (
	"errors"
	"io"
	"math/rand/v2"
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
		// Webhook and Alertmanager URLs: userinfo, secret parameters, token
		// paths.
		{"http://amuser:AmP4ss@127.0.0.1:9093", "http://amuser:xxxxx@127.0.0.1:9093"},
		{"https://hooks.slack.com/services/T0123ABCD/B0456EFGH/AbCdEf0123456789GhIjKlMn",
			"https://hooks.slack.com/services/T0123ABCD/B0456EFGH/xxxxx"},
		{"https://discord.com/api/webhooks/123456789012345678/aBcD-eFgH_1234567890aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789abcdefghijkl",
			"https://discord.com/api/webhooks/123456789012345678/xxxxx"},
		{"https://h/hook?X-Amz-Signature=abc123&X-Amz-Date=20260101", "https://h/hook?X-Amz-Signature=xxxxx&X-Amz-Date=20260101"},
		{"https://h/cb?client_secret=s1&api-key=k1&sig=g1&username=sink&secure=true", "https://h/cb?client_secret=xxxxx&api-key=xxxxx&sig=xxxxx&username=sink&secure=true"},
		{"https://h/cb#access_token=abc", "https://h/cb#access_token=xxxxx"},
		{"webhook oncall=https://h/x/AbCdEf0123456789GhIjKlMn?token=t0k", "webhook oncall=https://h/x/xxxxx?token=xxxxx"},
		// As a JSON log line quotes an error that quotes the URL.
		{`{"err":"Post \"https://h/services/T0/B0/AbCdEf0123456789GhIjKlMn\": refused"}`, `{"err":"Post \"https://h/services/T0/B0/xxxxx\": refused"}`},
		{"(see https://h/hook/AbCdEf0123456789GhIjKlMn).", "(see https://h/hook/xxxxx)."},
		{"[oncall=https://h/a/AbCdEf0123456789GhIjKlMn,https://u:pw@h2/b]", "[oncall=https://h/a/xxxxx,https://u:xxxxx@h2/b]"},
		{"[a=http://h/x?token=T1,http://h2/y?key=K2&z=1,http://h3/z?sig=a,b]", "[a=http://h/x?token=xxxxx,http://h2/y?key=xxxxx&z=1,http://h3/z?sig=xxxxx"}, // the value runs to the end: the comma and bracket could be its own
		// Paths of words, versions and IDs stay.
		{"http://am:9093/api/v2/alerts", "http://am:9093/api/v2/alerts"},
		{"https://hooks.example/rdmawatch-incidents-production/v1/IncomingWebhook", "https://hooks.example/rdmawatch-incidents-production/v1/IncomingWebhook"},
		{"POST: 503 Service Unavailable: try again", "POST: 503 Service Unavailable: try again"},
	}
	for _, tt := range tests {
		if got := String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTokenLike(t *testing.T) {
	for _, tc := range []struct {
		seg  string
		want bool
	}{
		{"AbCdEf0123456789GhIjKlMn", true},         // Slack
		{"0123456789abcdef0123456789abcdef", true}, // hex
		{"aBcDeFgHiJkLmNoP", true},                 // mixed case, 16
		{"123456789012345678", false},              // digits only: an ID (Discord's), not its token
		{"12345678901234567890123456789012", true}, // 32 digits
		{"aBcDeFgHiJkLmNo", false},                 // 15: too short
		{"T0123ABCD", false},
		{"rdmawatch-incidents-production", false},
		{"alerts", false},
		{"IncomingWebhook", false},
		{"AbCdEf0123456789.GhIj", false}, // a dot: not one run
		{"", false},
	} {
		if got := TokenLike(tc.seg); got != tc.want {
			t.Errorf("TokenLike(%q) = %v, want %v", tc.seg, got, tc.want)
		}
	}
	if got := Tokens("/services/T0/B0/AbCdEf0123456789GhIjKlMn/x"); len(got) != 1 || got[0] != "AbCdEf0123456789GhIjKlMn" {
		t.Errorf("Tokens = %q", got)
	}
}

// TestStringRandomTokens: random tokens of the alphabets webhooks use, in
// the path and as parameters, never come out, whatever their letters.
func TestStringRandomTokens(t *testing.T) {
	const (
		base62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
		b64url = base62 + "-_"
		hex    = "0123456789abcdef"
	)
	rng := rand.New(rand.NewPCG(1, 2))
	token := func(alphabet string, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for i := 0; i < 2000; i++ {
		for _, tok := range []string{token(base62, 24), token(b64url, 68), token(hex, 32), token(base62, 40)} {
			for _, s := range []string{
				"https://hooks.example/services/T0/B0/" + tok,
				"POST \"https://hooks.example/api/webhooks/1/" + tok + "\": EOF",
				"https://h/x?token=" + tok,
				"https://u:" + tok + "@h:9093",
			} {
				if got := String(s); strings.Contains(got, tok) {
					t.Fatalf("String(%q) = %q keeps the token", s, got)
				}
			}
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
