package robots_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"breakwater/robots"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const agent = "breakwater"

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// mustParse builds Rules from a 200 response body.
func mustParse(tb testing.TB, body string) *robots.Rules {
	tb.Helper()
	r, err := robots.FromResponse(200, []byte(body), t0)
	if err != nil {
		tb.Fatalf("FromResponse(200): %v", err)
	}
	return r
}

type check struct {
	agent, path string
	want        bool
}

func checkAllowed(tb testing.TB, r *robots.Rules, checks []check) {
	tb.Helper()
	for _, c := range checks {
		if got := r.Allowed(c.path, c.agent); got != c.want {
			tb.Errorf("Allowed(%q, %q) = %v, want %v", c.path, c.agent, got, c.want)
		}
	}
}

const privateBody = "User-agent: *\nDisallow: /private\n"

func TestFromResponseStatus(t *testing.T) {
	tests := []struct {
		status      int
		unavailable bool
		private     bool // whether /private is allowed
	}{
		{200, false, false},
		{203, false, false},
		{400, false, true},
		{401, false, true},
		{403, false, true},
		{404, false, true},
		{410, false, true},
		{429, true, false},
		{500, true, false},
		{503, true, false},
		{599, true, false},
		{301, true, false},
		{100, true, false},
		{0, true, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			r, err := robots.FromResponse(tt.status, []byte(privateBody), t0)
			if tt.unavailable {
				if !errors.Is(err, robots.ErrUnavailable) || r != nil {
					t.Fatalf("got (%v, %v), want (nil, ErrUnavailable)", r, err)
				}
				if !strings.Contains(err.Error(), fmt.Sprint(tt.status)) {
					t.Errorf("error %q does not name status %d", err, tt.status)
				}
				return
			}
			if err != nil {
				t.Fatalf("FromResponse: %v", err)
			}
			if r.Status != tt.status || !r.FetchedAt.Equal(t0) {
				t.Errorf("Status, FetchedAt = %d, %v; want %d, %v", r.Status, r.FetchedAt, tt.status, t0)
			}
			checkAllowed(t, r, []check{{agent, "/private", tt.private}, {agent, "/public", true}})
		})
	}
}

// fakeServer answers Getter calls from a table keyed by URL and records them.
type fakeServer struct {
	mu    sync.Mutex
	resp  map[string]fakeResp
	calls []string
}

type fakeResp struct {
	status   int
	location string
	body     string
	err      error
}

func (f *fakeServer) get(_ context.Context, url string) (int, string, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, url)
	r, ok := f.resp[url]
	if !ok {
		return 599, "", nil, nil // the table did not expect this URL; fail closed
	}
	return r.status, r.location, []byte(r.body), r.err
}

// redirectChain maps example.com/robots.txt through n redirects ending in final.
func redirectChain(n int, final fakeResp) map[string]fakeResp {
	m := map[string]fakeResp{}
	for i := 0; i < n; i++ {
		from := "http://example.com/robots.txt"
		if i > 0 {
			from = fmt.Sprintf("http://example.com/r%d", i)
		}
		m[from] = fakeResp{status: 302, location: fmt.Sprintf("/r%d", i+1)}
	}
	last := "http://example.com/robots.txt"
	if n > 0 {
		last = fmt.Sprintf("http://example.com/r%d", n)
	}
	m[last] = final
	return m
}

func TestFetch(t *testing.T) {
	ok := fakeResp{status: 200, body: privateBody}
	errDial := errors.New("dial refused")
	tests := []struct {
		name        string
		resp        map[string]fakeResp
		wantStatus  int  // when no error
		private     bool // whether /private is allowed
		unavailable bool
		wantCalls   int
	}{
		{"direct 200", redirectChain(0, ok), 200, false, false, 1},
		{"404", redirectChain(0, fakeResp{status: 404}), 404, true, false, 1},
		{"503", redirectChain(0, fakeResp{status: 503}), 0, false, true, 1},
		{"429 after redirect", redirectChain(1, fakeResp{status: 429}), 0, false, true, 2},
		{"unreachable", redirectChain(0, fakeResp{err: errDial}), 0, false, true, 1},
		{"5 redirects", redirectChain(5, ok), 200, false, false, 6},
		{"6 redirects", redirectChain(6, ok), 302, true, false, 6},
		{"absolute cross-host", map[string]fakeResp{
			"http://example.com/robots.txt":           {status: 301, location: "https://www.example.com:8443/robots.txt#frag"},
			"https://www.example.com:8443/robots.txt": ok,
		}, 200, false, false, 2},
		{"relative dot segments", map[string]fakeResp{
			"http://example.com/robots.txt":       {status: 308, location: "a/../b/robots.txt?x=1"},
			"http://example.com/b/robots.txt?x=1": ok,
		}, 200, false, false, 2},
		{"scheme-relative", map[string]fakeResp{
			"http://example.com/robots.txt": {status: 307, location: "//cdn.example.net/r.txt"},
			"http://cdn.example.net/r.txt":  ok,
		}, 200, false, false, 2},
		{"loop", map[string]fakeResp{
			"http://example.com/robots.txt": {status: 302, location: "/a"},
			"http://example.com/a":          {status: 302, location: "/robots.txt"},
		}, 302, true, false, 2},
		{"self loop", map[string]fakeResp{
			"http://example.com/robots.txt": {status: 301, location: "http://example.com/robots.txt"},
		}, 301, true, false, 1},
		{"3xx without location", redirectChain(0, fakeResp{status: 302}), 302, true, false, 1},
		{"redirect to ftp", map[string]fakeResp{
			"http://example.com/robots.txt": {status: 302, location: "ftp://example.com/robots.txt"},
		}, 302, true, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeServer{resp: tt.resp}
			r, err := robots.Fetch(context.Background(), f.get, "http", "example.com", t0)
			if len(f.calls) != tt.wantCalls {
				t.Errorf("made %d requests %q, want %d", len(f.calls), f.calls, tt.wantCalls)
			}
			if tt.unavailable {
				if !errors.Is(err, robots.ErrUnavailable) || r != nil {
					t.Fatalf("got (%v, %v), want ErrUnavailable", r, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Fetch: %v", err)
			}
			if r.Status != tt.wantStatus || !r.FetchedAt.Equal(t0) {
				t.Errorf("Status, FetchedAt = %d, %v; want %d, %v", r.Status, r.FetchedAt, tt.wantStatus, t0)
			}
			checkAllowed(t, r, []check{{agent, "/private", tt.private}})
		})
	}
}

func TestFetchUnreachableWrapsCause(t *testing.T) {
	errDial := errors.New("dial refused")
	f := &fakeServer{resp: map[string]fakeResp{"https://example.com:8443/robots.txt": {err: errDial}}}
	_, err := robots.Fetch(context.Background(), f.get, "https", "example.com:8443", t0)
	if !errors.Is(err, robots.ErrUnavailable) || !errors.Is(err, errDial) {
		t.Fatalf("err = %v, want ErrUnavailable wrapping %v", err, errDial)
	}
	if f.calls[0] != "https://example.com:8443/robots.txt" {
		t.Errorf("requested %q", f.calls[0])
	}
}

func TestFetchRejectsBadInput(t *testing.T) {
	for _, tt := range []struct{ scheme, host string }{
		{"ftp", "example.com"}, {"http", ""}, {"http", "a.com/x"}, {"http", "u@a.com"},
	} {
		f := &fakeServer{}
		if _, err := robots.Fetch(context.Background(), f.get, tt.scheme, tt.host, t0); err == nil || errors.Is(err, robots.ErrUnavailable) {
			t.Errorf("Fetch(%q, %q) err = %v, want a non-Unavailable error", tt.scheme, tt.host, err)
		}
		if len(f.calls) != 0 {
			t.Errorf("Fetch(%q, %q) made requests %q", tt.scheme, tt.host, f.calls)
		}
	}
}

// TestFetchLoopback drives Fetch with a real HTTP getter against a loopback
// server that redirects once.
func TestFetchLoopback(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/real-robots.txt", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/real-robots.txt", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "User-agent: breakwater\nDisallow: /secret\nCrawl-delay: 2\n")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	defer client.CloseIdleConnections()
	get := func(ctx context.Context, url string) (int, string, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, "", nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, robots.MaxBodySize+1))
		return resp.StatusCode, resp.Header.Get("Location"), body, err
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	r, err := robots.Fetch(context.Background(), get, "http", host, t0)
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	checkAllowed(t, r, []check{{agent, "/secret/x", false}, {agent, "/open", true}, {"other", "/secret", true}})
	if d := r.CrawlDelay(agent); d != 2*time.Second {
		t.Errorf("CrawlDelay = %v, want 2s", d)
	}
}

func TestAllowedGroupSelection(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		checks []check
	}{
		{"specific group replaces star", "User-agent: *\nDisallow: /\n\nUser-agent: breakwater\nDisallow: /b\n", []check{
			{agent, "/a", true}, {agent, "/b", false}, {"other", "/a", false},
		}},
		{"case-insensitive", "User-agent: BreakWater\nDisallow: /b\n", []check{
			{agent, "/b", false}, {"BREAKWATER", "/b", false},
		}},
		{"version suffix on line and agent", "User-agent: Breakwater/2.1 (+http://x)\nDisallow: /b\n", []check{
			{agent, "/b", false}, {"breakwater/0.1", "/b", false},
		}},
		{"prefix of token does not match", "User-agent: break\nDisallow: /\nUser-agent: breakwater-news\nDisallow: /\n", []check{
			{agent, "/x", true}, {"break", "/x", false},
		}},
		{"no group and no star", "User-agent: other\nDisallow: /\n", []check{
			{agent, "/x", true}, {"other", "/x", false},
		}},
		{"groups for same token merge", "User-agent: breakwater\nDisallow: /a\n\nUser-agent: x\nDisallow: /\n\nUser-agent: breakwater\nDisallow: /b\n", []check{
			{agent, "/a", false}, {agent, "/b", false}, {agent, "/c", true},
		}},
		{"consecutive user-agent lines share a group", "User-agent: x\nUser-agent: breakwater\nDisallow: /a\n", []check{
			{agent, "/a", false}, {"x", "/a", false},
		}},
		{"star and token in one group", "User-agent: *\nUser-agent: breakwater\nDisallow: /a\nUser-agent: other\nDisallow: /b\n", []check{
			{agent, "/a", false}, {agent, "/b", true}, {"other", "/a", true},
		}},
		{"empty disallow closes group", "User-agent: breakwater\nDisallow:\n\nUser-agent: other\nDisallow: /\n", []check{
			{agent, "/x", true}, {"other", "/x", false},
		}},
		{"rules before any user-agent are ignored", "Disallow: /\nCrawl-delay: x\nUser-agent: *\nDisallow: /a\n", []check{
			{agent, "/a", false}, {agent, "/b", true},
		}},
		{"malformed lines do not void the file", "User-agent: *\nCrawl-delay: soon\nCrawl-delay:\nFoo bar baz\nnonsense\nDisallow: /a # comment\n", []check{
			{agent, "/a", false}, {agent, "/b", true},
		}},
		{"CRLF, BOM and missing colon", "\xef\xbb\xbfUser-agent: *\r\nDisallow /a\r\n", []check{
			{agent, "/a", false}, {agent, "/b", true},
		}},
		{"robots.txt always allowed", "User-agent: *\nDisallow: /\n", []check{
			{agent, "/robots.txt", true}, {agent, "/robots.txt?x", false}, {agent, "/", false},
		}},
		{"empty body", "", []check{{agent, "/", true}}},
		{"agent without token uses star", "User-agent: *\nDisallow: /a\n", []check{{"", "/a", false}, {"*", "/a", false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkAllowed(t, mustParse(t, tt.body), tt.checks)
		})
	}
}

func TestAllowedPrecedence(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		checks []check
	}{
		{"longest match wins", "User-agent: *\nDisallow: /a\nAllow: /a/b\n", []check{
			{agent, "/a/b/c", true}, {agent, "/a/c", false}, {agent, "/ab", false}, {agent, "/b", true},
		}},
		{"longer disallow beats allow", "User-agent: *\nAllow: /a\nDisallow: /a/b\n", []check{
			{agent, "/a/b", false}, {agent, "/a/x", true},
		}},
		{"allow wins a tie whatever the order", "User-agent: *\nDisallow: /page\nAllow: /page\n", []check{
			{agent, "/page", true},
		}},
		{"allow root with disallow root", "User-agent: *\nDisallow: /\nAllow: /\n", []check{{agent, "/x", true}}},
		{"case-sensitive paths", "User-agent: *\nDisallow: /Private\n", []check{
			{agent, "/Private", false}, {agent, "/private", true},
		}},
		{"wildcard suffix", "User-agent: *\nDisallow: /*.pdf$\n", []check{
			{agent, "/a/b.pdf", false}, {agent, "/a/b.pdf?x=1", true}, {agent, "/b.pdfx", true},
		}},
		{"wildcard anchored at start", "User-agent: *\nDisallow: /a*b\nDisallow: /c$\n", []check{
			{agent, "/a/x/b", false}, {agent, "/x/a/b", true}, {agent, "/c", false}, {agent, "/x/c", true},
		}},
		{"trailing star is a prefix", "User-agent: *\nDisallow: /fish*\n", []check{
			{agent, "/fish.html", false}, {agent, "/Fish", true},
		}},
		{"leading star", "User-agent: *\nDisallow: *private\n", []check{
			{agent, "/x/private", false}, {agent, "/x/publ", true},
		}},
		{"longer wildcard allow beats disallow", "User-agent: *\nDisallow: /shop\nAllow: /shop/*.html\n", []check{
			{agent, "/shop/a.html", true}, {agent, "/shop/a.php", false},
		}},
		{"dollar in the middle is literal", "User-agent: *\nDisallow: /a$b\n", []check{
			{agent, "/a$b", false}, {agent, "/a%24b", false}, {agent, "/a", true},
		}},
		{"query strings", "User-agent: *\nDisallow: /*?\nAllow: /search?q=\nDisallow: /list?page=1$\n", []check{
			{agent, "/item?id=1", false}, {agent, "/item", true}, {agent, "/search?q=go", true},
			{agent, "/list?page=1", false}, {agent, "/list?page=10", false},
		}},
		{"query only rule", "User-agent: *\nDisallow: /list?page=1$\n", []check{
			{agent, "/list?page=1", false}, {agent, "/list?page=10", true}, {agent, "/list", true},
		}},
		{"percent-encoding normalized", "User-agent: *\nDisallow: /foo/bar/ツ\nDisallow: /%62%61%7A\nDisallow: /x%2fy\n", []check{
			{agent, "/foo/bar/%E3%83%84", false}, {agent, "/foo/bar/%e3%83%84", false},
			{agent, "/baz", false}, {agent, "/%62az", false},
			{agent, "/x%2Fy", false}, {agent, "/x/y", true},
		}},
		{"path without slash", "User-agent: *\nDisallow: a\n", []check{{agent, "a", false}, {agent, "/a", false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkAllowed(t, mustParse(t, tt.body), tt.checks)
		})
	}
}

func TestCrawlDelay(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		agent string
		want  time.Duration
	}{
		{"our token", "User-agent: *\nCrawl-delay: 9\nUser-agent: breakwater\nCrawl-delay: 3\n", agent, 3 * time.Second},
		{"star fallback", "User-agent: *\nCrawl-delay: 9\nUser-agent: other\nCrawl-delay: 3\n", agent, 9 * time.Second},
		{"fraction", "User-agent: *\nCrawl-delay: 0.5\n", agent, 500 * time.Millisecond},
		{"largest of several", "User-agent: breakwater\nCrawl-delay: 2\nCrawl-delay: 7\nCrawl-delay: 1\n", agent, 7 * time.Second},
		{"invalid ignored", "User-agent: *\nCrawl-delay: -1\nCrawl-delay: NaN\nCrawl-delay: abc\n", agent, 0},
		{"huge capped", "User-agent: *\nCrawl-delay: 1e300\n", agent, robots.MaxCrawlDelay},
		{"inf capped", "User-agent: *\nCrawl-delay: +Inf\n", agent, robots.MaxCrawlDelay},
		{"none", "User-agent: *\nDisallow: /\n", agent, 0},
		{"specific group without delay", "User-agent: *\nCrawl-delay: 9\nUser-agent: breakwater\nDisallow: /a\n", agent, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustParse(t, tt.body).CrawlDelay(tt.agent); got != tt.want {
				t.Errorf("CrawlDelay(%q) = %v, want %v", tt.agent, got, tt.want)
			}
		})
	}
}

func TestSitemaps(t *testing.T) {
	r := mustParse(t, "Sitemap: https://example.com/a.xml\nUser-agent: *\nsitemap: http://example.com/b.xml.gz # c\nSitemap: /relative.xml\nSitemap: ftp://x/y\nDisallow: /\n")
	want := []string{"https://example.com/a.xml", "http://example.com/b.xml.gz"}
	got := r.Sitemaps()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Sitemaps() = %q, want %q", got, want)
	}
	got[0] = "mutated"
	if r.Sitemaps()[0] != want[0] {
		t.Error("Sitemaps() exposes internal state")
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	body := "User-agent: *\nDisallow: /a\nCrawl-delay: 4\nUser-agent: breakwater\nDisallow: /b\nSitemap: https://e.com/s.xml\n"
	ok200, _ := robots.FromResponse(200, []byte(body), t0)
	gone, _ := robots.FromResponse(404, []byte(body), t0.Add(time.Hour))
	f := &fakeServer{resp: redirectChain(6, fakeResp{status: 200, body: body})}
	loop, _ := robots.Fetch(context.Background(), f.get, "http", "example.com", t0)
	for _, r := range []*robots.Rules{ok200, gone, loop, mustParse(t, "")} {
		t.Run(fmt.Sprint(r.Status), func(t *testing.T) {
			b, err := r.MarshalBinary()
			if err != nil {
				t.Fatalf("MarshalBinary: %v", err)
			}
			got, err := robots.Unmarshal(b)
			if err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !got.FetchedAt.Equal(r.FetchedAt) || got.Status != r.Status || !bytes.Equal(got.Body, r.Body) {
				t.Errorf("round trip = (%v, %d, %q), want (%v, %d, %q)", got.FetchedAt, got.Status, got.Body, r.FetchedAt, r.Status, r.Body)
			}
			for _, a := range []string{agent, "other"} {
				for _, p := range []string{"/a", "/b", "/c"} {
					if got.Allowed(p, a) != r.Allowed(p, a) {
						t.Errorf("Allowed(%q, %q) differs after round trip", p, a)
					}
				}
				if got.CrawlDelay(a) != r.CrawlDelay(a) {
					t.Errorf("CrawlDelay(%q) differs after round trip", a)
				}
			}
			if fmt.Sprint(got.Sitemaps()) != fmt.Sprint(r.Sitemaps()) {
				t.Errorf("Sitemaps differ: %q vs %q", got.Sitemaps(), r.Sitemaps())
			}
		})
	}
}

func TestUnmarshalRejectsCorrupt(t *testing.T) {
	good, err := mustParse(t, privateBody).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string][]byte{
		"empty":          nil,
		"bad version":    append([]byte{99}, good[1:]...),
		"truncated":      good[:len(good)-1],
		"trailing bytes": append(append([]byte(nil), good...), 0),
		"header only":    good[:1],
	}
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			if r, err := robots.Unmarshal(b); err == nil {
				t.Errorf("Unmarshal = %+v, want error", r.Status)
			}
		})
	}
}

func TestExpired(t *testing.T) {
	r := mustParse(t, privateBody)
	tests := []struct {
		now  time.Time
		ttl  time.Duration
		want bool
	}{
		{t0, robots.DefaultTTL, false},
		{t0.Add(-time.Hour), robots.DefaultTTL, false},
		{t0.Add(24*time.Hour - time.Nanosecond), robots.DefaultTTL, false},
		{t0.Add(24 * time.Hour), robots.DefaultTTL, true},
		{t0.Add(48 * time.Hour), robots.DefaultTTL, true},
		{t0.Add(24*time.Hour - time.Nanosecond), 0, false},
		{t0.Add(24 * time.Hour), 0, true},
		{t0.Add(59 * time.Minute), time.Hour, false},
		{t0.Add(time.Hour), time.Hour, true},
	}
	for _, tt := range tests {
		if got := r.Expired(tt.now, tt.ttl); got != tt.want {
			t.Errorf("Expired(t0%+v, %v) = %v, want %v", tt.now.Sub(t0), tt.ttl, got, tt.want)
		}
	}
}

func TestBodyCap(t *testing.T) {
	head := "User-agent: *\nDisallow: /early\n"
	prefix := head + strings.Repeat("# padding\n", (robots.MaxBodySize-len(head)-100)/10)
	// filler ends so that the cap falls right after "Disallow: /ab".
	filler := strings.Repeat("#", robots.MaxBodySize-len(prefix)-len("Disallow: /ab")-1) + "\n"
	tests := []struct {
		name   string
		body   string
		checks []check
	}{
		{"rule past the cap ignored", prefix + strings.Repeat("#", robots.MaxBodySize) + "\nDisallow: /late\n", []check{
			{agent, "/early", false}, {agent, "/late", true},
		}},
		{"line cut by the cap dropped", prefix + filler + "Disallow: /abcdef\n", []check{
			{agent, "/early", false}, {agent, "/abx", true}, {agent, "/abcdef", true},
		}},
		{"line ending exactly at the cap kept", prefix + filler + "Disallow: /a\n", []check{
			{agent, "/a", false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustParse(t, tt.body)
			if len(r.Body) > robots.MaxBodySize {
				t.Errorf("len(Body) = %d > %d", len(r.Body), robots.MaxBodySize)
			}
			checkAllowed(t, r, tt.checks)
		})
	}
}

func TestBodyIsCopied(t *testing.T) {
	body := []byte(privateBody)
	r := mustParse(t, string(body))
	r2, _ := robots.FromResponse(200, body, t0)
	copy(body, "XXXXXXXXXXXXXXXXXXXX")
	if !bytes.Equal(r2.Body, r.Body) {
		t.Errorf("Rules.Body aliases the caller's buffer: %q", r2.Body)
	}
}

func TestConcurrentUse(t *testing.T) {
	r := mustParse(t, "User-agent: *\nDisallow: /a\nUser-agent: breakwater\nDisallow: /b\nCrawl-delay: 1\n")
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				a := fmt.Sprintf("agent%c", 'a'+rune(i%20)) // more tokens than the cache holds
				if r.Allowed("/b", agent) || !r.Allowed("/a", agent) || r.Allowed("/a", a) || r.CrawlDelay(agent) != time.Second {
					t.Error("inconsistent answer under concurrency")
					return
				}
			}
		}()
	}
	wg.Wait()
}

func FuzzFromResponse(f *testing.F) {
	f.Add(200, []byte(privateBody))
	f.Add(200, []byte("User-agent: *\nDisallow: /*a$\nAllow: *%zz%41$$\nCrawl-delay: 1e99\nSitemap: http://x/\n"))
	f.Add(200, []byte("\xef\xbb\xbfDisallow: /x\r\nUser-agent:\xff\nDisallow: \x00\x01*\n"))
	f.Add(404, []byte(""))
	f.Add(503, []byte("x"))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		r, err := robots.FromResponse(status, body, t0)
		if err != nil {
			if !errors.Is(err, robots.ErrUnavailable) || r != nil {
				t.Fatalf("got (%v, %v)", r, err)
			}
			return
		}
		if len(r.Body) > robots.MaxBodySize {
			t.Fatalf("len(Body) = %d", len(r.Body))
		}
		for _, p := range []string{"/", "/a", "/x?y=%zz", string(body[:min(len(body), 40)])} {
			r.Allowed(p, agent)
		}
		if !r.Allowed("/robots.txt", agent) {
			t.Fatal("/robots.txt disallowed")
		}
		if d := r.CrawlDelay(agent); d < 0 || d > robots.MaxCrawlDelay {
			t.Fatalf("CrawlDelay = %v", d)
		}
		b, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		r2, err := robots.Unmarshal(b)
		if err != nil {
			t.Fatalf("Unmarshal: %v", err)
		}
		if r2.Allowed("/a", agent) != r.Allowed("/a", agent) {
			t.Fatal("round trip changed Allowed")
		}
	})
}

// The crawler's own token and any other, asked from many goroutines at
// once and in either order, each get their own group's answer.
func TestAllowedPerTokenUnderConcurrency(t *testing.T) {
	body := []byte("User-agent: breakwater\nDisallow: /own\n\nUser-agent: other\nDisallow: /other\n\nUser-agent: *\nDisallow: /all\n")
	for _, first := range []string{"Breakwater/1.0", "Other/2.0"} {
		r, err := robots.FromResponse(200, body, time.Unix(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		r.Allowed("/", first)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for _, c := range []struct {
					agent, path string
					want        bool
				}{
					{"Breakwater/1.0", "/own", false}, {"Breakwater/1.0", "/other", true}, {"Breakwater/1.0", "/all", true},
					{"Other/2.0", "/other", false}, {"Other/2.0", "/own", true},
					{"Third/3", "/all", false}, {"Third/3", "/own", true},
				} {
					if got := r.Allowed(c.path, c.agent); got != c.want {
						t.Errorf("first %s: Allowed(%s, %s) = %v, want %v", first, c.path, c.agent, got, c.want)
					}
				}
			})
		}
		wg.Wait()
	}
}
