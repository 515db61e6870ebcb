package alert

import (
	"errors"
	"fmt"
	"net/url"
)

// checkURL accepts absolute http(s) URLs only; the error shows the URL
// without any password it carries.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("target URL does not parse as a URL")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("target URL %q: want http(s)://host[:port]/path", u.Redacted())
	}
	return nil
}
