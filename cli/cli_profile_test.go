package cli

import "testing"

func TestProfilePathNamesTheProcess(t *testing.T) {
	for _, tc := range []struct{ pattern, want string }{
		{"", ""},
		{"/tmp/crawl.prof", "/tmp/crawl.prof"},
		{"/tmp/crawl-%p.prof", "/tmp/crawl-4242.prof"},
		{"%p/%p", "4242/4242"},
	} {
		if got := profilePath(tc.pattern, 4242); got != tc.want {
			t.Errorf("profilePath(%q) = %q, want %q", tc.pattern, got, tc.want)
		}
	}
}
