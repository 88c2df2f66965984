package robots_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"breakwater/robots"
)

// FuzzRules asks arbitrary robots.txt files about an arbitrary path for
// an arbitrary User-Agent (FuzzFromResponse covers statuses and a few
// fixed paths). Nothing panics, and the answers are deterministic: the
// same in a second parse of the file, after its matcher cache has been
// filled with other agents, after a MarshalBinary round trip, for the
// agent's product token in upper case or with another version, and for
// the path without its leading "/". A group for another agent put in
// front changes nothing for this one. A file that is empty or all
// comments allows everything, with no delay and no sitemaps, and so does
// any 4xx but 429.
func FuzzRules(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte, path, agent string) {
		r := mustRules(t, body)
		allowed, delay := r.Allowed(path, agent), r.CrawlDelay(agent)
		if delay < 0 || delay > robots.MaxCrawlDelay {
			t.Fatalf("CrawlDelay(%q) = %v", agent, delay)
		}
		same := func(what string, r *robots.Rules, path, agent string) {
			t.Helper()
			if a, d := r.Allowed(path, agent), r.CrawlDelay(agent); a != allowed || d != delay {
				t.Fatalf("%s: Allowed(%q, %q) = %v, delay %v; first %v, %v", what, path, agent, a, d, allowed, delay)
			}
		}
		same("asked again", r, path, agent)
		same("parsed again", mustRules(t, body), path, agent)
		for i := range 12 { // more agents than the matcher cache holds
			r.Allowed(path, fmt.Sprintf("other%c", 'a'+i))
		}
		same("after other agents", r, path, agent)
		b, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		r2, err := robots.Unmarshal(b)
		if err != nil {
			t.Fatalf("Unmarshal: %v", err)
		}
		same("after a round trip", r2, path, agent)
		tok := robots.ProductToken(agent)
		same("upper-case token", r, path, upperASCII(tok)+"/9.9 (+http://example.com/bot)")
		if !strings.HasPrefix(path, "/") {
			same("with a leading /", r, "/"+path, agent)
		}
		if tok != "zzzotherbot" {
			other := "User-agent: zzzotherbot\nDisallow: /\nCrawl-delay: 5\n"
			same("another agent's group in front", mustRules(t, append([]byte(other), bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))...)), path, agent)
		}
		if !r.Allowed("/robots.txt", agent) {
			t.Fatal("/robots.txt disallowed")
		}

		// Nothing to obey: an empty file, one of comments only, a 4xx.
		for _, nothing := range [][]byte{nil, commentedOut(body)} {
			r := mustRules(t, nothing)
			if !r.Allowed(path, agent) || r.CrawlDelay(agent) != 0 || len(r.Sitemaps()) != 0 {
				t.Fatalf("file %q: Allowed(%q, %q) = %v, delay %v, sitemaps %q; want everything allowed, nothing else",
					nothing, path, agent, r.Allowed(path, agent), r.CrawlDelay(agent), r.Sitemaps())
			}
		}
		for _, status := range []int{400, 401, 403, 404, 410, 499} {
			r, err := robots.FromResponse(status, body, t0)
			if err != nil || !r.Allowed(path, agent) || r.CrawlDelay(agent) != 0 {
				t.Fatalf("status %d: %v; want everything allowed", status, err)
			}
		}
		for _, status := range []int{429, 500, 503, 0, 600} {
			if r, err := robots.FromResponse(status, body, t0); !errors.Is(err, robots.ErrUnavailable) || r != nil {
				t.Fatalf("status %d: %v, %v; want ErrUnavailable", status, r, err)
			}
		}
	})
}

func mustRules(t *testing.T, body []byte) *robots.Rules {
	t.Helper()
	r, err := robots.FromResponse(200, body, t0)
	if err != nil {
		t.Fatalf("FromResponse(200): %v", err)
	}
	return r
}

// commentedOut is body with every line made a comment.
func commentedOut(body []byte) []byte {
	out := []byte{'#'}
	for _, c := range body {
		out = append(out, c)
		if c == '\n' || c == '\r' {
			out = append(out, '#')
		}
	}
	return out
}

func upperASCII(s string) string {
	return strings.Map(func(c rune) rune {
		if 'a' <= c && c <= 'z' {
			return c - 'a' + 'A'
		}
		return c
	}, s)
}
