package main

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/rdmawatch/rdmawatch/internal/redact"
)

// Schemes each address flag takes. A malformed address (htp:/foo, a port
// above 65535) is refused before anything dials: retrying cannot fix it,
// and a one-shot command would otherwise wait out --wait on a typo.
var (
	natsSchemes       = []string{"nats", "tls", "ws", "wss"}
	clickhouseSchemes = []string{"clickhouse", "tcp"}
)

// checkURLs checks value, a comma-separated list of URLs when list is
// true, against schemes; the error names the flag and the address (without
// its password).
func checkURLs(flag, value string, list bool, schemes ...string) error {
	parts := []string{value}
	if list {
		parts = strings.Split(value, ",")
	}
	for _, s := range parts {
		if err := checkURL(strings.TrimSpace(s), schemes); err != nil {
			return fmt.Errorf("%s %q: %w", flag, redact.String(strings.TrimSpace(s)), err)
		}
	}
	return nil
}

func checkURL(s string, schemes []string) error {
	want := "want " + strings.Join(schemes, "://, ") + "://host:port"
	if s == "" {
		return fmt.Errorf("empty address; %s", want)
	}
	if !strings.Contains(s, "://") {
		// nats.go takes a bare host:port too; anything else without "://"
		// (htp:/foo) is a URL with a wrong scheme or no scheme at all.
		if _, port, err := net.SplitHostPort(s); schemes[0] == "nats" && err == nil && isDigits(port) {
			s = "nats://" + s
		} else if u, err := url.Parse(s); err == nil && u.Scheme != "" && !isDigits(u.Opaque) {
			return fmt.Errorf("scheme %q; %s", u.Scheme, want)
		} else {
			return fmt.Errorf("no scheme; %s", want)
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("does not parse as a URL; %s", want)
	}
	ok := false
	for _, sc := range schemes {
		ok = ok || strings.EqualFold(u.Scheme, sc)
	}
	if !ok {
		return fmt.Errorf("scheme %q; %s", u.Scheme, want)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("no host; %s", want)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %q: want 1-65535", p)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return fmt.Errorf("empty port; %s", want)
	}
	return nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
