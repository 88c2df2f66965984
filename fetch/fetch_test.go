package fetch

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"breakwater/fetch/fetchtest"
)

const (
	testMaxBody = 64 << 10
	// hostileTimeout is the fetch timeout in tests that expect one to fire.
	hostileTimeout = 200 * time.Millisecond
	// hostileDeadline bounds how long such a test may take: generous for a
	// loaded machine under -race, yet far below "hung".
	hostileDeadline = 5 * time.Second
)

// testFetchOptions allows loopback and uses timeouts long enough that only
// the tests meant to time out do.
func testOptions() Options {
	return Options{UserAgent: "Breakwater-test/1.0", Timeout: 10 * time.Second,
		ConnectTimeout: 5 * time.Second, MaxBody: testMaxBody, AllowPrivate: true}
}

func newTestFetcher(t *testing.T, o Options) *Fetcher {
	t.Helper()
	f := New(o)
	t.Cleanup(f.Close)
	return f
}

func newTestServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

var (
	rawServer       = fetchtest.RawServer
	readRequestHead = fetchtest.ReadRequestHead
)

// fetchWithin fetches and fails the test if the fetch outlived limit.
func fetchWithin(t *testing.T, f *Fetcher, rawURL string, limit time.Duration) *Response {
	t.Helper()
	start := time.Now()
	r := f.Get(context.Background(), rawURL)
	if d := time.Since(start); d > limit {
		t.Fatalf("Fetch(%s) took %v, want under %v", rawURL, d, limit)
	}
	return r
}

func TestFetchOK(t *testing.T) {
	t.Parallel()
	var gotUA atomic.Value
	srv := newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
		gotUA.Store(r.Header.Get("User-Agent"))
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<title>hi</title>")
	})
	r := newTestFetcher(t, testOptions()).Get(context.Background(), srv.URL+"/page")
	if r.Err != nil {
		t.Fatalf("Fetch: %v", r.Err)
	}
	if r.URL != srv.URL+"/page" || r.Status != 200 || r.ContentType != "text/html; charset=utf-8" {
		t.Errorf("got URL %q status %d type %q", r.URL, r.Status, r.ContentType)
	}
	if string(r.Body) != "<title>hi</title>" || r.Truncated || r.Location != "" {
		t.Errorf("got body %q truncated %v location %q", r.Body, r.Truncated, r.Location)
	}
	if r.Header.Get("Content-Type") == "" {
		t.Error("Header not kept")
	}
	if ua := gotUA.Load(); ua != "Breakwater-test/1.0" {
		t.Errorf("server saw User-Agent %q", ua)
	}
}

func TestFetchDefaultUserAgent(t *testing.T) {
	t.Parallel()
	var gotUA atomic.Value
	srv := newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
		gotUA.Store(r.Header.Get("User-Agent"))
	})
	o := testOptions()
	o.UserAgent = ""
	newTestFetcher(t, o).Get(context.Background(), srv.URL)
	if ua := gotUA.Load(); ua != DefaultUserAgent {
		t.Errorf("server saw User-Agent %q, want %q", ua, DefaultUserAgent)
	}
}

func TestFetchUsesClock(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, func(http.ResponseWriter, *http.Request) {})
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	ticks := []time.Time{t0, t0.Add(1500 * time.Millisecond)}
	o := testOptions()
	o.Now = func() time.Time { now := ticks[0]; ticks = ticks[1:]; return now }
	f := newTestFetcher(t, o)
	r := f.Get(context.Background(), srv.URL)
	if !r.Started.Equal(t0) || r.Duration != 1500*time.Millisecond {
		t.Errorf("Started %v Duration %v, want %v and 1.5s", r.Started, r.Duration, t0)
	}
}

func TestFetchDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		status   int
		location string
		want     string // "" + srv.URL prefix added when relative
	}{
		{"relative 302", 302, "../next?x=1#frag", "/next?x=1"},
		{"absolute 301", 301, "http://other.example/x", "http://other.example/x"},
		{"308 to path", 308, "/moved", "/moved"},
		{"javascript location dropped", 302, "javascript:alert(1)", ""},
		{"mailto location dropped", 307, "mailto:a@example.com", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var followed atomic.Int32
			srv := newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/a/start" {
					followed.Add(1)
				}
				w.Header().Set("Location", tt.location)
				w.WriteHeader(tt.status)
			})
			r := newTestFetcher(t, testOptions()).Get(context.Background(), srv.URL+"/a/start")
			want := tt.want
			if strings.HasPrefix(want, "/") {
				want = srv.URL + want
			}
			if r.Err != nil || r.Status != tt.status || r.Location != want {
				t.Errorf("got status %d location %q err %v, want %d %q", r.Status, r.Location, r.Err, tt.status, want)
			}
			if n := followed.Load(); n != 0 {
				t.Errorf("redirect was followed %d times", n)
			}
		})
	}
}

func TestFetchBodyCap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		size          int
		wantLen       int
		wantTruncated bool
	}{
		{"empty", 0, 0, false},
		{"under cap", testMaxBody - 1, testMaxBody - 1, false},
		{"exactly cap", testMaxBody, testMaxBody, false},
		{"one over cap", testMaxBody + 1, testMaxBody, true},
		{"far over cap", 20 * testMaxBody, testMaxBody, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Write(bytes.Repeat([]byte("x"), tt.size))
			})
			r := newTestFetcher(t, testOptions()).Get(context.Background(), srv.URL)
			if r.Err != nil {
				t.Fatalf("Fetch: %v", r.Err)
			}
			if len(r.Body) != tt.wantLen || r.Truncated != tt.wantTruncated {
				t.Errorf("got %d bytes truncated %v, want %d %v", len(r.Body), r.Truncated, tt.wantLen, tt.wantTruncated)
			}
		})
	}
}

func TestFetchEndlessBodyIsCapped(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 32<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	r := fetchWithin(t, newTestFetcher(t, testOptions()), srv.URL, hostileDeadline)
	if r.Err != nil || r.Status != 200 || len(r.Body) != testMaxBody || !r.Truncated {
		t.Errorf("got status %d, %d bytes, truncated %v, err %v; want 200, %d, true, nil",
			r.Status, len(r.Body), r.Truncated, r.Err, testMaxBody)
	}
}

// gzipBomb returns one gzip member holding 1 MiB of zeros (about 1 KiB) and
// how many of them make up 1 GiB: concatenated members are one valid gzip
// stream, so the bomb is streamed without compressing a gigabyte.
func gzipBomb(t *testing.T) (member []byte, count int) {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), 1 << 10
}

// Not parallel: it measures allocation.
func TestFetchGzipBombIsCappedAfterDecoding(t *testing.T) {
	member, count := gzipBomb(t)
	var acceptEncoding atomic.Value
	srv := newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
		acceptEncoding.Store(r.Header.Get("Accept-Encoding"))
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Type", "text/html")
		for range count {
			if _, err := w.Write(member); err != nil {
				return
			}
		}
	})
	f := newTestFetcher(t, testOptions())

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := fetchWithin(t, f, srv.URL, hostileDeadline)
	runtime.ReadMemStats(&after)

	if ae, _ := acceptEncoding.Load().(string); !strings.Contains(ae, "gzip") {
		t.Fatalf("client sent Accept-Encoding %q; the transport should ask for gzip itself", ae)
	}
	if r.Err != nil || len(r.Body) != testMaxBody || !r.Truncated {
		t.Fatalf("got %d bytes, truncated %v, err %v; want %d decoded bytes, truncated", len(r.Body), r.Truncated, r.Err, testMaxBody)
	}
	if !bytes.Equal(r.Body, make([]byte, testMaxBody)) {
		t.Error("body is not the decoded zeros")
	}
	// Decoding the whole gigabyte would allocate at least that much.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("fetch allocated %d MiB for a %d KiB cap", alloc>>20, testMaxBody>>10)
	}
}

func TestFetchHostileServersDoNotHang(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		url        func(t *testing.T) string
		timeout    time.Duration
		wantStatus int
		wantErr    string
	}{
		{"slow drip body", func(t *testing.T) string {
			return newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-r.Context().Done():
						return
					case <-tick.C:
						w.Write([]byte("."))
						w.(http.Flusher).Flush()
					}
				}
			}).URL
		}, hostileTimeout, 200, "deadline exceeded"},
		{"headers never sent", func(t *testing.T) string {
			return newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
				<-r.Context().Done()
			}).URL
		}, hostileTimeout, 0, ""},
		{"huge headers", func(t *testing.T) string {
			return "http://" + rawServer(t, func(c net.Conn) {
				readRequestHead(c)
				io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 2<<20)+"\r\n\r\n")
			})
			// Long timeout: the header cap, not the clock, must end this one.
		}, hostileDeadline / 2, 0, "headers exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := testOptions()
			o.Timeout = tt.timeout
			r := fetchWithin(t, newTestFetcher(t, o), tt.url(t), hostileDeadline)
			if r.Err == nil {
				t.Fatalf("Fetch succeeded with status %d, want an error", r.Status)
			}
			if r.Status != tt.wantStatus || !strings.Contains(r.Err.Error(), tt.wantErr) {
				t.Errorf("got status %d err %q, want %d and an error containing %q", r.Status, r.Err, tt.wantStatus, tt.wantErr)
			}
		})
	}
}

func TestFetchBlocksPrivateAddresses(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := newTestServer(t, func(http.ResponseWriter, *http.Request) { hits.Add(1) })
	o := testOptions()
	o.AllowPrivate = false
	r := newTestFetcher(t, o).Get(context.Background(), srv.URL)
	if !errors.Is(r.Err, ErrBlockedAddress) || !IsBlocked(r.Err) {
		t.Fatalf("err = %v, want ErrBlockedAddress through the http error chain", r.Err)
	}
	if !strings.Contains(r.Err.Error(), "127.0.0.1") || r.Status != 0 || hits.Load() != 0 {
		t.Errorf("err %q status %d hits %d, want the address named, no response, no hit", r.Err, r.Status, hits.Load())
	}
}

func TestFetchBadURL(t *testing.T) {
	t.Parallel()
	f := newTestFetcher(t, testOptions())
	for _, raw := range []string{"http://exa mple.com/", "ftp://127.0.0.1/", ""} {
		if r := f.Get(context.Background(), raw); r.Err == nil || r.Status != 0 || r.URL != raw {
			t.Errorf("Fetch(%q) = status %d err %v, want an error", raw, r.Status, r.Err)
		}
	}
}

func TestFetchCanceledContext(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, func(http.ResponseWriter, *http.Request) {})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := newTestFetcher(t, testOptions()).Get(ctx, srv.URL)
	if !errors.Is(r.Err, context.Canceled) || r.Status != 0 {
		t.Errorf("got status %d err %v, want context.Canceled", r.Status, r.Err)
	}
}

// countNewConns counts the connections srv accepts.
func countNewConns(srv *http.Server) *atomic.Int32 {
	n := new(atomic.Int32)
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	return n
}

// countingServer serves "ok" and counts the connections it accepts.
func countingServer(t *testing.T) (srv *httptest.Server, dials *atomic.Int32) {
	t.Helper()
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	dials = countNewConns(srv.Config)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, dials
}

func TestFetchReusesConnections(t *testing.T) {
	t.Parallel()
	srv, dials := countingServer(t)
	f := newTestFetcher(t, testOptions())
	for i := range 3 {
		if r := f.Get(context.Background(), srv.URL); r.Err != nil {
			t.Fatalf("fetch %d: %v", i, r.Err)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("3 sequential fetches opened %d connections, want 1 (keep-alive)", n)
	}
}

// The scheduler takes hosts in turn, so the idle pool must hold a connection
// for every host in rotation: one too small evicts each connection before
// its host comes round again, and every request redials.
func TestFetchIdlePoolCoversHostsInRotation(t *testing.T) {
	t.Parallel()
	const hosts = 300
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })}
	dials := countNewConns(srv)
	t.Cleanup(func() { srv.Close() })
	urls := make([]string, hosts)
	for i := range urls {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		urls[i] = "http://" + ln.Addr().String() + "/"
	}
	for _, tc := range []struct{ idle, wantDials int }{{hosts, hosts}, {hosts / 2, 2 * hosts}} {
		opts := testOptions()
		opts.IdleConns = tc.idle
		f := newTestFetcher(t, opts)
		dials.Store(0)
		for pass := range 2 {
			for _, u := range urls {
				if r := f.Get(context.Background(), u); r.Err != nil {
					t.Fatalf("pass %d, %s: %v", pass, u, r.Err)
				}
			}
		}
		if n := dials.Load(); int(n) != tc.wantDials {
			t.Errorf("IdleConns %d: two rounds over %d hosts opened %d connections, want %d", tc.idle, hosts, n, tc.wantDials)
		}
		f.CloseIdle()
	}
}

// A connection idle longer than IdleTimeout is closed: the next request to
// its host dials anew. One used again sooner is reused.
func TestFetchIdleTimeoutClosesConnections(t *testing.T) {
	t.Parallel()
	srv, dials := countingServer(t)
	opts := testOptions()
	opts.IdleTimeout = 500 * time.Millisecond
	f := newTestFetcher(t, opts)
	for i, pause := range []time.Duration{0, 0, 1500 * time.Millisecond} {
		time.Sleep(pause)
		if r := f.Get(context.Background(), srv.URL); r.Err != nil {
			t.Fatalf("fetch %d: %v", i, r.Err)
		}
	}
	if n := dials.Load(); n != 2 {
		t.Errorf("fetches back to back, then 1.5 s apart, with a 500 ms idle timeout opened %d connections, want 2", n)
	}
}

// Not parallel: goleak compares whole-process goroutines.
func TestFetcherCloseLeavesNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	f := New(testOptions())
	if r := f.Get(context.Background(), srv.URL); r.Err != nil {
		t.Fatalf("Fetch: %v", r.Err)
	}
	f.Close()
	srv.Close()
}

// Gzip decoders are pooled across fetches: many concurrent fetches of
// gzipped pages of every size, read whole or streamed, among broken and
// cut gzip bodies, each decode to exactly their own page.
func TestFetchGzipDecodersReusedAcrossPages(t *testing.T) {
	t.Parallel()
	page := func(n int) []byte {
		return bytes.Repeat([]byte(fmt.Sprintf("<p>page %d of the site</p>\n", n)), 1+n*37%500)
	}
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	srv := newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Type", "text/html")
		body := gz(page(n))
		switch n % 7 {
		case 3:
			body = append(body[:10:10], "not deflate at all, not at all"...) // a broken stream
		case 5:
			body = body[:len(body)/2] // cut short
		}
		w.Write(body)
	})
	f := newTestFetcher(t, testOptions())
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for n := w; n < 400; n += 8 {
				url := fmt.Sprintf("%s/%d", srv.URL, n)
				var got []byte
				var r *Response
				if n%2 == 0 {
					r = f.Get(context.Background(), url)
					got = r.Body
				} else {
					r = f.Fetch(context.Background(), Request{URL: url,
						Read: func(_ *Response, body io.Reader) { got, _ = io.ReadAll(body) }})
				}
				switch broken := n%7 == 3 || n%7 == 5; {
				case broken && r.Err == nil:
					t.Errorf("%s: a broken gzip body read without error", url)
				case !broken && (r.Err != nil || !bytes.Equal(got, page(n))):
					t.Errorf("%s: %d bytes, err %v; want its %d-byte page", url, len(got), r.Err, len(page(n)))
				}
			}
		})
	}
	wg.Wait()
}
