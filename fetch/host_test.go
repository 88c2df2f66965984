package fetch

import "testing"

func TestBlockedHost(t *testing.T) {
	for _, tc := range []struct {
		host, reason string
	}{
		{"127.0.0.1", "loopback"},
		{"localhost", "loopback"},
		{"LOCALHOST.", "loopback"},
		{"app.localhost", "loopback"},
		{"[::1]", "loopback"},
		{"10.0.0.7", "private"},
		{"[::ffff:192.168.1.1]", "private"},
		{"169.254.169.254", "link-local"},
		{"example.com", ""},
		{"8.8.8.8", ""},
		{"notlocalhost", ""},
	} {
		reason, blocked := BlockedHost(tc.host)
		if reason != tc.reason || blocked != (tc.reason != "") {
			t.Errorf("BlockedHost(%q) = %q, %v; want %q", tc.host, reason, blocked, tc.reason)
		}
	}
}
