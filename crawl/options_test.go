package crawl

import (
	"strings"
	"testing"

	"breakwater/robots"
)

// The product token is one rule (RFC 9309's: letters, '-' and '_'), used for
// robots.txt groups and for refusals alike. A User-Agent whose first word
// breaks the rule is refused up front: before, "my.bot/1.0" was matched as
// "my" in robots.txt and as "my.bot" in refusals.
func TestUserAgentProductToken(t *testing.T) {
	for _, tc := range []struct {
		userAgent string
		token     string // "" means Validate must refuse it
	}{
		{"breakwater/0.1.0", "breakwater"},
		{"My-Bot_2/1.0 (+http://example.test/bot)", ""}, // a digit is not a token character
		{"My-Bot/1.0 (+http://example.test/bot)", "my-bot"},
		{"Crawler", "crawler"},
		{"Crawler (compatible)", "crawler"},
		{"my.bot/1.0", ""},
		{"bot2/1.0", ""},
		{"/1.0", ""},
		{"", ""},
	} {
		o := DefaultOptions()
		o.UserAgent = tc.userAgent
		err := o.Validate()
		if tc.token == "" {
			if err == nil || !strings.Contains(err.Error(), "--user-agent") {
				t.Errorf("Validate(%q) = %v, want an error naming --user-agent", tc.userAgent, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Validate(%q) = %v, want nil", tc.userAgent, err)
		}
		if got := robots.ProductToken(tc.userAgent); got != tc.token {
			t.Errorf("ProductToken(%q) = %q, want %q", tc.userAgent, got, tc.token)
		}
	}
}

// Every default is built from its package's constant, and the probe gate's
// deadline follows the request timeout.
func TestDefaultsFromPackageConstants(t *testing.T) {
	o := DefaultOptions()
	if err := o.Validate(); err != nil {
		t.Fatalf("DefaultOptions().Validate() = %v", err)
	}
	o.Timeout = 7e9
	if got := o.breakerConfig().ProbeTimeout; got != o.Timeout+ProbeSlack {
		t.Errorf("probe timeout = %s, want Timeout + ProbeSlack = %s", got, o.Timeout+ProbeSlack)
	}
}

// A socks5h proxy would resolve target names itself, past the address
// guard: refused up front unless --allow-private; socks5 is not.
func TestValidateRefusesSOCKS5hUnderTheGuard(t *testing.T) {
	for _, tc := range []struct {
		proxy        string
		allowPrivate bool
		ok           bool
	}{
		{"socks5h://user:secret@127.0.0.1:1080", false, false},
		{"socks5h://user:secret@127.0.0.1:1080", true, true},
		{"socks5://127.0.0.1:1080", false, true},
		{"http://127.0.0.1:3128", false, true},
	} {
		o := DefaultOptions()
		o.Proxy, o.AllowPrivate = tc.proxy, tc.allowPrivate
		err := o.Validate()
		if tc.ok {
			if err != nil {
				t.Errorf("Validate(--proxy %s, allow-private %v) = %v, want nil", tc.proxy, tc.allowPrivate, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "--proxy socks5h://user:xxxxx@127.0.0.1:1080") ||
			!strings.Contains(err.Error(), "--allow-private") || strings.Contains(err.Error(), "secret") {
			t.Errorf("Validate(--proxy %s) = %v, want an error naming the proxy (password hidden) and --allow-private", tc.proxy, err)
		}
	}
}
