package demosite

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeClock is read by server goroutines while the test moves it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func startSite(t *testing.T, specs []HostSpec, opts SiteOptions) *Site {
	t.Helper()
	s, err := Start(specs, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func newClient(t *testing.T, timeout time.Duration) *http.Client {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: timeout}
}

type response struct {
	status int
	header http.Header
	body   string
}

func get(t *testing.T, c *http.Client, u string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatalf("new request %s: %v", u, err)
	}
	req.Header.Set("User-Agent", "demosite-test/1.0")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", u, err)
	}
	return response{resp.StatusCode, resp.Header, string(b)}
}

var hrefRE = regexp.MustCompile(`href="([^"]*)"`)

func hrefs(body string) []string {
	var out []string
	for _, m := range hrefRE.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// canonical resolves href against page the way a crawler should: fragment
// and empty query dropped, non-HTTP schemes skipped.
func canonical(t *testing.T, page, href string) (string, bool) {
	t.Helper()
	base, err := url.Parse(page)
	if err != nil {
		t.Fatalf("parse %q: %v", page, err)
	}
	ref, err := url.Parse(href)
	if err != nil {
		t.Fatalf("parse href %q on %s: %v", href, page, err)
	}
	u := base.ResolveReference(ref)
	if u.Scheme != "http" {
		return "", false
	}
	u.Fragment, u.RawFragment, u.ForceQuery = "", "", false
	return u.String(), true
}

func healthySpecs(pages ...int) []HostSpec {
	var specs []HostSpec
	for i, n := range pages {
		specs = append(specs, HostSpec{Name: fmt.Sprintf("h%d", i), Pages: n})
	}
	return specs
}

// snapshot fetches every page and replaces ports by host names so two sites
// can be compared.
func snapshot(t *testing.T, s *Site) map[string]string {
	t.Helper()
	c := newClient(t, 5*time.Second)
	var repl []string
	for _, h := range s.Hosts() {
		repl = append(repl, h.BaseURL(), "{"+h.Name+"}")
	}
	r := strings.NewReplacer(repl...)
	out := make(map[string]string)
	for _, u := range s.URLs() {
		out[r.Replace(u)] = r.Replace(get(t, c, u).body)
	}
	return out
}

func TestPagesDeterministicForSeed(t *testing.T) {
	specs := append(healthySpecs(12, 7, 1), HostSpec{Name: "dead", Pages: 9, Behavior: Dead})
	opts := SiteOptions{Seed: 42, DeadLinksPerPage: 2}
	a := snapshot(t, startSite(t, specs, opts))
	b := snapshot(t, startSite(t, specs, opts))
	if len(a) != 20 {
		t.Fatalf("got %d pages, want 20", len(a))
	}
	for k, v := range a {
		if b[k] != v {
			t.Fatalf("page %s differs between two sites with seed 42", k)
		}
	}
	opts.Seed = 43
	c := snapshot(t, startSite(t, specs, opts))
	differ := 0
	for k, v := range a {
		if c[k] != v {
			differ++
		}
	}
	if differ == 0 {
		t.Errorf("seeds 42 and 43 gave identical sites; cross links should depend on the seed")
	}
}

func TestEveryPageReachableFromRoot(t *testing.T) {
	tests := []struct {
		pages, links int
	}{{1, 5}, {2, 5}, {3, 1}, {40, 5}, {60, 1}, {97, 3}}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("pages=%d,links=%d", tt.pages, tt.links), func(t *testing.T) {
			s := startSite(t, healthySpecs(tt.pages, 5), SiteOptions{LinksPerPage: tt.links, Seed: 1})
			h := s.Host("h0")
			seen := bfsSameHost(t, newClient(t, 5*time.Second), h)
			if len(seen) != tt.pages {
				t.Fatalf("reached %d pages from /, want %d", len(seen), tt.pages)
			}
			for i := range tt.pages {
				if !seen[h.PageURL(i)] {
					t.Errorf("page %d unreachable", i)
				}
			}
		})
	}
}

// bfsSameHost crawls h from "/" following only same-host links, checking each
// page's size and title on the way.
func bfsSameHost(t *testing.T, c *http.Client, h *Host) map[string]bool {
	t.Helper()
	seen := map[string]bool{h.PageURL(0): true}
	for queue := []string{h.PageURL(0)}; len(queue) > 0; queue = queue[1:] {
		page := queue[0]
		r := get(t, c, page)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: status %d", page, r.status)
		}
		if n := len(r.body); n < 2000 || n > 4096 {
			t.Errorf("%s is %d bytes, want 2-4 KB", page, n)
		}
		if !strings.Contains(r.body, "<title>"+h.Name+" page ") {
			t.Errorf("%s lacks a title naming %s", page, h.Name)
		}
		for _, href := range hrefs(r.body) {
			u, ok := canonical(t, page, href)
			if ok && strings.HasPrefix(u, h.BaseURL()+"/") && !seen[u] {
				seen[u] = true
				queue = append(queue, u)
			}
		}
	}
	return seen
}

func TestLinksResolveToKnownPages(t *testing.T) {
	s := startSite(t, DemoSpecs(), SiteOptions{DeadLinksPerPage: 2, Seed: 5})
	known := make(map[string]bool)
	for _, u := range s.URLs() {
		known[u] = true
	}
	dead := s.Host("deadend")
	for i := range dead.Spec().Pages {
		known[dead.PageURL(i)] = true
	}
	for _, name := range []string{"alpha", "bravo", "charlie"} {
		known[s.Host(name).BaseURL()+PrivatePath] = true
	}
	c := newClient(t, 5*time.Second)
	noise := map[string]int{}
	for _, name := range []string{"alpha", "bravo", "charlie"} {
		for _, page := range pagesOf(s.Host(name)) {
			for _, href := range hrefs(get(t, c, page).body) {
				countNoise(noise, href)
				u, ok := canonical(t, page, href)
				if !ok {
					if !strings.HasPrefix(href, "mailto:") {
						t.Errorf("%s: unexpected non-HTTP link %q", page, href)
					}
					continue
				}
				if !known[u] {
					t.Errorf("%s: link %q resolves to unknown %s", page, href, u)
				}
			}
		}
	}
	for _, kind := range []string{"fragment", "empty query", "mailto", "dot-dot"} {
		if noise[kind] == 0 {
			t.Errorf("no %s noise link on the healthy hosts", kind)
		}
	}
}

func pagesOf(h *Host) []string {
	var out []string
	for i := range h.Spec().Pages {
		out = append(out, h.PageURL(i))
	}
	return out
}

func countNoise(noise map[string]int, href string) {
	switch {
	case strings.Contains(href, "#"):
		noise["fragment"]++
	case strings.HasSuffix(href, "?"):
		noise["empty query"]++
	case strings.HasPrefix(href, "mailto:"):
		noise["mailto"]++
	case strings.HasPrefix(href, "../"):
		noise["dot-dot"]++
	}
}

func TestDeadLinksSpreadOverDeadHost(t *testing.T) {
	specs := append(healthySpecs(30, 30), HostSpec{Name: "dead", Pages: 50, Behavior: Dead})
	s := startSite(t, specs, SiteOptions{DeadLinksPerPage: 3, Seed: 9})
	dead := s.Host("dead").BaseURL() + "/"
	c := newClient(t, 5*time.Second)
	distinct := map[string]bool{}
	for _, page := range s.URLs() {
		onPage := map[string]bool{}
		for _, href := range hrefs(get(t, c, page).body) {
			if strings.HasPrefix(href, dead) {
				onPage[href] = true
				distinct[href] = true
			}
		}
		if len(onPage) != 3 {
			t.Errorf("%s links %d distinct dead URLs, want 3", page, len(onPage))
		}
	}
	if len(distinct) != 50 {
		t.Errorf("site links %d distinct dead URLs, want all 50", len(distinct))
	}
}

func TestRouting(t *testing.T) {
	s := startSite(t, []HostSpec{
		{Name: "robots", Pages: 40, Robots: "User-agent: *\nDisallow: /private/\n", PrivatePage: true},
		{Name: "plain", Pages: 3},
	}, SiteOptions{})
	c := newClient(t, 5*time.Second)
	tests := []struct {
		host, path string
		want       int
	}{
		{"robots", "/", 200}, {"robots", "/p/1", 200}, {"robots", "/p/39", 200},
		{"robots", "/p/2?", 200}, {"robots", "/p/40", 404}, {"robots", "/p/0", 404},
		{"robots", "/p/01", 404}, {"robots", "/p/x", 404}, {"robots", "/nope", 404},
		{"robots", "/robots.txt", 200}, {"robots", PrivatePath, 200},
		{"plain", "/robots.txt", 404}, {"plain", PrivatePath, 404}, {"plain", "/p/3", 404},
	}
	for _, tt := range tests {
		t.Run(tt.host+tt.path, func(t *testing.T) {
			r := get(t, c, s.Host(tt.host).BaseURL()+tt.path)
			if r.status != tt.want {
				t.Errorf("status %d, want %d", r.status, tt.want)
			}
		})
	}
	if r := get(t, c, s.Host("robots").BaseURL()+"/robots.txt"); !strings.Contains(r.body, "Disallow: /private/") {
		t.Errorf("robots.txt body %q", r.body)
	}
	resp, err := c.Post(s.Roots()[0], "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST status %d, want 405", resp.StatusCode)
	}
}

func TestRootsURLsAndHosts(t *testing.T) {
	specs := []HostSpec{
		{Name: "a", Pages: 3}, {Name: "d", Pages: 10, Behavior: Dead},
		{Name: "f", Pages: 2, Behavior: Flaky}, {Pages: 0},
	}
	s := startSite(t, specs, SiteOptions{})
	roots := s.Roots()
	for i, name := range []string{"a", "d", "f", "host-3"} {
		if h := s.Host(name); h == nil || roots[i] != h.BaseURL()+"/" {
			t.Fatalf("root %d = %q, host %q = %v", i, roots[i], name, h)
		}
	}
	if s.Host("missing") != nil {
		t.Error("Host(missing) != nil")
	}
	got := s.URLs()
	want := append(append(pagesOf(s.Host("a")), pagesOf(s.Host("f"))...), s.Host("host-3").PageURL(0))
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("URLs() = %v, want %v", got, want)
	}
}

func TestStartRejectsBadSpecs(t *testing.T) {
	tests := []struct {
		name  string
		specs []HostSpec
	}{
		{"duplicate name", []HostSpec{{Name: "x"}, {Name: "y"}, {Name: "x"}}},
		{"flaky rate above 1", []HostSpec{{Name: "x"}, {Behavior: Flaky, FlakyRate: 1.5}}},
		{"negative max rps", []HostSpec{{Behavior: Throttling, MaxRPS: -1}}},
		{"unknown behavior", []HostSpec{{Behavior: Behavior(99)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if s, err := Start(tt.specs, SiteOptions{}); err == nil {
				_ = s.Close()
				t.Fatal("Start succeeded, want error")
			}
		})
	}
}

func TestDeadHostNeverAnswers(t *testing.T) {
	s, err := Start([]HostSpec{{Name: "dead", Pages: 5, Behavior: Dead}}, SiteOptions{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	h := s.Host("dead")
	c := newClient(t, 200*time.Millisecond)
	_, err = c.Get(h.PageURL(1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("GET dead host: err = %v, want a timeout", err)
	}
	// A raw connection stays open until Close, which must release it.
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.BaseURL(), "http://"))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := conn.Read(make([]byte, 1)); n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read before Close: n=%d err=%v, want a timeout", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("read after Close: err=%v, want EOF or reset", err)
	}
	if n := h.RequestCount(); n != 2 {
		t.Errorf("dead host logged %d connections, want 2", n)
	}
	c.CloseIdleConnections()
	goleak.VerifyNone(t)
}

func TestRecoveringFlipsAtRecoverAfter(t *testing.T) {
	clock := &fakeClock{t: t0}
	s := startSite(t, []HostSpec{{Name: "r", Pages: 3, Behavior: Recovering, RecoverAfter: 20 * time.Second}},
		SiteOptions{Now: clock.Now})
	c := newClient(t, 5*time.Second)
	steps := []struct {
		at   time.Duration
		want int
	}{
		{0, 503}, {10 * time.Second, 503}, {20*time.Second - time.Nanosecond, 503},
		{20 * time.Second, 200}, {time.Hour, 200},
	}
	for _, st := range steps {
		clock.Set(t0.Add(st.at))
		if r := get(t, c, s.Roots()[0]); r.status != st.want {
			t.Errorf("at +%v: status %d, want %d", st.at, r.status, st.want)
		}
	}
}

func TestRefusingNamesToken(t *testing.T) {
	tests := []struct {
		spec      HostSpec
		wantToken string
	}{
		{HostSpec{Name: "default", Behavior: Refusing}, "breakwater"},
		{HostSpec{Name: "custom", Behavior: Refusing, RefuseToken: "mybot"}, "mybot"},
	}
	for _, tt := range tests {
		t.Run(tt.spec.Name, func(t *testing.T) {
			s := startSite(t, []HostSpec{tt.spec}, SiteOptions{})
			c := newClient(t, 5*time.Second)
			for _, path := range []string{"/", "/robots.txt", "/nope"} {
				r := get(t, c, s.Roots()[0]+strings.TrimPrefix(path, "/"))
				if r.status != http.StatusForbidden {
					t.Errorf("%s: status %d, want 403", path, r.status)
				}
				if !strings.Contains(r.body, tt.wantToken+" is not welcome") {
					t.Errorf("%s: body %q does not name %q", path, r.body, tt.wantToken)
				}
				if got := r.header.Get("X-Block-Reason"); got != tt.wantToken {
					t.Errorf("%s: X-Block-Reason %q, want %q", path, got, tt.wantToken)
				}
			}
		})
	}
}

func flakyStatuses(t *testing.T, spec HostSpec, seed int64, n int) []int {
	t.Helper()
	s := startSite(t, []HostSpec{{Name: "pad"}, spec}, SiteOptions{Seed: seed})
	c := newClient(t, 5*time.Second)
	out := make([]int, n)
	for i := range out {
		out[i] = get(t, c, s.Host(spec.Name).PageURL(i%spec.Pages)).status
	}
	return out
}

func TestFlakyRateWithinTolerance(t *testing.T) {
	tests := []struct {
		rate, want float64
	}{{0, 0.3}, {0.1, 0.1}, {0.5, 0.5}, {1, 1}}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.rate), func(t *testing.T) {
			// In-process: 1000 loopback round trips per rate are slow under -race
			// and add nothing that TestFlakyDeterministicForSeed does not cover.
			s := startSite(t, []HostSpec{{Name: "f", Pages: 10, Behavior: Flaky, FlakyRate: tt.rate}}, SiteOptions{Seed: 3})
			req := httptest.NewRequest(http.MethodGet, s.Roots()[0], nil)
			fails := 0
			for range 1000 {
				rec := httptest.NewRecorder()
				s.Host("f").serveHTTP(rec, req)
				switch st := rec.Code; st {
				case 500:
					fails++
				case 200:
				default:
					t.Fatalf("unexpected status %d", st)
				}
			}
			if got := float64(fails) / 1000; got < tt.want-0.05 || got > tt.want+0.05 {
				t.Errorf("failure rate %.3f, want %.2f±0.05", got, tt.want)
			}
		})
	}
}

func TestFlakyDeterministicForSeed(t *testing.T) {
	spec := HostSpec{Name: "f", Pages: 4, Behavior: Flaky}
	a := fmt.Sprint(flakyStatuses(t, spec, 7, 100))
	if b := fmt.Sprint(flakyStatuses(t, spec, 7, 100)); a != b {
		t.Errorf("same seed, different failures:\n%s\n%s", a, b)
	}
	if c := fmt.Sprint(flakyStatuses(t, spec, 8, 100)); a == c {
		t.Errorf("seeds 7 and 8 gave the same failures")
	}
}

func TestThrottlingOverMaxRPS(t *testing.T) {
	type step struct {
		at   time.Duration
		want int
	}
	tests := []struct {
		name  string
		spec  HostSpec
		retry string
		steps []step
	}{
		{"default 2 rps", HostSpec{Behavior: Throttling}, "2", []step{
			{0, 200}, {0, 200}, {0, 429}, {999 * time.Millisecond, 429},
			{time.Second, 200}, {1500 * time.Millisecond, 200}, {1600 * time.Millisecond, 429},
			{2 * time.Second, 200}, {5 * time.Second, 200},
		}},
		{"half rps", HostSpec{Behavior: Throttling, MaxRPS: 0.5, RetryAfterSeconds: 7}, "7", []step{
			{0, 200}, {time.Second, 429}, {2 * time.Second, 200}, {3 * time.Second, 429},
		}},
		{"10 rps", HostSpec{Behavior: Throttling, MaxRPS: 10}, "2", []step{
			{0, 200}, {0, 200}, {0, 200}, {0, 200}, {0, 200},
			{0, 200}, {0, 200}, {0, 200}, {0, 200}, {0, 200}, {0, 429},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{t: t0}
			tt.spec.Name, tt.spec.Pages = "th", 5
			s := startSite(t, []HostSpec{tt.spec}, SiteOptions{Now: clock.Now})
			c := newClient(t, 5*time.Second)
			for i, st := range tt.steps {
				clock.Set(t0.Add(st.at))
				r := get(t, c, s.Roots()[0])
				if r.status != st.want {
					t.Errorf("step %d at +%v: status %d, want %d", i, st.at, r.status, st.want)
				}
				if ra := r.header.Get("Retry-After"); r.status == 429 && ra != tt.retry {
					t.Errorf("step %d: Retry-After %q, want %q", i, ra, tt.retry)
				}
			}
		})
	}
}

func TestRequestLogRecordsRequests(t *testing.T) {
	clock := &fakeClock{t: t0}
	s := startSite(t, healthySpecs(5, 5), SiteOptions{Now: clock.Now})
	h := s.Host("h0")
	c := newClient(t, 5*time.Second)
	paths := []string{"/", "/p/2?", "/nope"}
	for i, p := range paths {
		clock.Set(t0.Add(time.Duration(i) * time.Second))
		get(t, c, h.BaseURL()+p)
	}
	want := []Request{
		{Time: t0, Method: "GET", Path: "/", RequestURI: "/", Status: 200, UserAgent: "demosite-test/1.0"},
		{Time: t0.Add(time.Second), Method: "GET", Path: "/p/2", RequestURI: "/p/2?", Status: 200, UserAgent: "demosite-test/1.0"},
		{Time: t0.Add(2 * time.Second), Method: "GET", Path: "/nope", RequestURI: "/nope", Status: 404, UserAgent: "demosite-test/1.0"},
	}
	got := h.Requests()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Requests() =\n%v\nwant\n%v", got, want)
	}
	if h.RequestCount() != 3 || s.Host("h1").RequestCount() != 0 {
		t.Errorf("counts %d, %d; want 3, 0", h.RequestCount(), s.Host("h1").RequestCount())
	}
}

func TestManyHosts(t *testing.T) {
	begin := time.Now()
	s := startSite(t, BenchSpecs(800, 60, true, 500), SiteOptions{DeadLinksPerPage: 1, Seed: 1})
	t.Logf("started 801 hosts in %v", time.Since(begin))
	if d := time.Since(begin); d > 3*time.Second {
		t.Errorf("Start took %v; it should not pre-render pages", d)
	}
	urls := s.URLs()
	unique := map[string]bool{}
	for _, u := range urls {
		unique[u] = true
	}
	if len(urls) != 800*60 || len(unique) != len(urls) {
		t.Fatalf("URLs: %d, %d unique; want 48000", len(urls), len(unique))
	}
	c := newClient(t, 5*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < len(urls); i += len(urls) / 400 * 8 {
				if err := fetchOK(c, urls[i]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func fetchOK(c *http.Client, u string) error {
	resp, err := c.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fmt.Errorf("read %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", u, resp.StatusCode)
	}
	return nil
}

func TestDemoSpecsStart(t *testing.T) {
	s := startSite(t, DemoSpecs(), DemoOptions(1))
	if got, want := len(s.Roots()), 8; got != want {
		t.Fatalf("%d hosts, want %d", got, want)
	}
	behaviors := map[Behavior]int{}
	for _, h := range s.Hosts() {
		behaviors[h.Spec().Behavior]++
	}
	for b, want := range map[Behavior]int{Healthy: 3, Dead: 1, Recovering: 1, Refusing: 1, Flaky: 1, Throttling: 1} {
		if behaviors[b] != want {
			t.Errorf("%d %v hosts, want %d", behaviors[b], b, want)
		}
	}
}

func BenchmarkRenderPage(b *testing.B) {
	s, err := Start(BenchSpecs(10, 60, true, 500), SiteOptions{DeadLinksPerPage: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	h := s.Host("bench-003")
	req := httptest.NewRequest(http.MethodGet, h.PageURL(17), nil)
	b.ReportAllocs()
	for b.Loop() {
		h.serveHTTP(httptest.NewRecorder(), req)
	}
}

func BenchmarkFetchLoopback(b *testing.B) {
	s, err := Start(BenchSpecs(50, 60, false, 0), SiteOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	urls := s.URLs()
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	var next sync.Mutex
	i := 0
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			next.Lock()
			u := urls[i%len(urls)]
			i++
			next.Unlock()
			if err := fetchOK(c, u); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// HeldTime sums how long clients kept a dead host's connections open, so a
// bench can count worker time a crawler did not record.
func TestDeadHostHeldTime(t *testing.T) {
	s := startSite(t, []HostSpec{{Name: "dead", Pages: 1, Behavior: Dead}}, SiteOptions{Seed: 1})
	h := s.Host("dead")
	addr := strings.TrimPrefix(h.BaseURL(), "http://")
	const hold = 100 * time.Millisecond
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(hold)
		c.Close()
	}
	// The host's clock starts when it accepts, which can be a little after
	// the client's Dial returns: allow for that much less.
	const acceptSlack = 20 * time.Millisecond
	least := 2 * (hold - acceptSlack)
	deadline := time.Now().Add(5 * time.Second)
	for h.HeldTime() < least && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := h.HeldTime(); got < least || got > 2*hold+4*time.Second {
		t.Fatalf("HeldTime = %v after two connections held %v each", got, hold)
	}
	if got := s.Host("dead").RequestCount(); got != 2 {
		t.Fatalf("RequestCount = %d, want 2", got)
	}
}

func TestPageBytesPadsPagesWithDistinctText(t *testing.T) {
	site, err := Start(BenchSpecs(2, 4, false, 0), SiteOptions{Seed: 1, PageBytes: 30_000})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	for _, u := range site.URLs() {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(body) < 30_000 || len(body) > 31_000 {
			t.Fatalf("%s: %d bytes, want about 30,000", u, len(body))
		}
		paragraphs := strings.Split(string(body), "<p>")
		seen := map[string]bool{}
		for _, p := range paragraphs[1:] {
			if seen[p] {
				t.Fatalf("%s: a paragraph repeats within the page", u)
			}
			seen[p] = true
		}
	}
}

// With Gzip, a client that accepts gzip gets its page gzipped, one that
// does not gets it plain, and both read the same page.
func TestGzipPages(t *testing.T) {
	site, err := Start(BenchSpecs(1, 3, false, 0), SiteOptions{Seed: 1, Gzip: true})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	url := site.Hosts()[0].PageURL(1)
	get := func(accept string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Accept-Encoding", accept)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	plainResp, plain := get("identity")
	if plainResp.Header.Get("Content-Encoding") != "" || !bytes.Contains(plain, []byte("<html")) {
		t.Fatalf("without gzip: %q encoded, body %.40q", plainResp.Header.Get("Content-Encoding"), plain)
	}
	gzResp, gz := get("gzip")
	if gzResp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("with gzip: Content-Encoding %q", gzResp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(unzipped, plain) {
		t.Errorf("the gzipped page reads %d bytes (err %v), want the plain page's %d", len(unzipped), err, len(plain))
	}
}
