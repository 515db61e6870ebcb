// Package redact is a placeholder replaced on merge by the ops branch's
// redaction package (same String function).
package redact

import "net/url"

// String hides the password of a URL.
func String(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}
