package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"breakwater/store"
)

// TestMain fails the package when Serve leaves its accept loop or its
// context watcher running after the context ended.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var discard = slog.New(slog.DiscardHandler)

// fakeAPI answers with its func fields; a nil field fails the call.
type fakeAPI struct {
	StatusFn      func() (*Status, error)
	HostsFn       func(state string) ([]HostRow, error)
	TransitionsFn func(host string, since time.Time) ([]store.Transition, error)
	CasesFn       func() ([]store.Case, error)
	PauseFn       func(host, reason string) error
	UnpauseFn     func(host string) error
	ResolveCaseFn func(host string) error
	ResultsFn     func(failedOnly bool, fn func(*store.Result) error) error
	EdgesFn       func(fn func(store.Edge) error) error
	InlinksFn     func(url string, fn func(store.Edge) error) error
}

var _ API = (*fakeAPI)(nil)

var errNotFaked = errors.New("not faked")

func (f *fakeAPI) Status() (*Status, error) {
	if f.StatusFn == nil {
		return nil, errNotFaked
	}
	return f.StatusFn()
}

func (f *fakeAPI) Hosts(state string) ([]HostRow, error) {
	if f.HostsFn == nil {
		return nil, errNotFaked
	}
	return f.HostsFn(state)
}

func (f *fakeAPI) Transitions(host string, since time.Time) ([]store.Transition, error) {
	if f.TransitionsFn == nil {
		return nil, errNotFaked
	}
	return f.TransitionsFn(host, since)
}

func (f *fakeAPI) Cases() ([]store.Case, error) {
	if f.CasesFn == nil {
		return nil, errNotFaked
	}
	return f.CasesFn()
}

func (f *fakeAPI) Pause(host, reason string) error {
	if f.PauseFn == nil {
		return errNotFaked
	}
	return f.PauseFn(host, reason)
}

func (f *fakeAPI) Unpause(host string) error {
	if f.UnpauseFn == nil {
		return errNotFaked
	}
	return f.UnpauseFn(host)
}

func (f *fakeAPI) ResolveCase(host string) error {
	if f.ResolveCaseFn == nil {
		return errNotFaked
	}
	return f.ResolveCaseFn(host)
}

func (f *fakeAPI) Results(failedOnly bool, fn func(*store.Result) error) error {
	if f.ResultsFn == nil {
		return errNotFaked
	}
	return f.ResultsFn(failedOnly, fn)
}

func (f *fakeAPI) Edges(fn func(store.Edge) error) error {
	if f.EdgesFn == nil {
		return errNotFaked
	}
	return f.EdgesFn(fn)
}

func (f *fakeAPI) Inlinks(url string, fn func(store.Edge) error) error {
	if f.InlinksFn == nil {
		return errNotFaked
	}
	return f.InlinksFn(url, fn)
}

// serve starts Serve with api on a fresh socket in t.TempDir(); the test's
// cleanup ends it and waits for it.
func serve(t *testing.T, api API) (path string, stop func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "c.sock")
	return path, serveAt(t, path, api)
}

func serveAt(t *testing.T, path string, api API) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done, err := Serve(ctx, path, api, discard)
	if err != nil {
		cancel()
		t.Fatalf("Serve: %v", err)
	}
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return stop
}

// recorder is a fakeAPI that logs each call as "Method(args)" and answers
// with fixed results, or with err when it is set.
type recorder struct {
	fakeAPI
	calls []string
	err   error
}

var (
	fStatus = &Status{Counts: store.Counts{Seen: 5, Queued: 1, Fetched: 3, Failed: 1}, Running: true,
		InFlight: 2, Hosts: 2, HostsQueued: 1, FailedByClass: map[string]int{"timeout": 1},
		StatusCodes: map[int]int{200: 3}}
	fRows = []HostRow{{Host: "a.example", State: "open", Hold: "paused", HoldReason: "maintenance",
		Failures: 3, OpenedAt: t0, RestRemaining: time.Minute, Queued: 4, Deferred: 1, Fetched: 2, Failed: 1,
		Interval: time.Second, Throttles: 1, Retries: 2, FirstAttempts: 9}}
	fTrans = []store.Transition{{At: t0, Host: "a.example", From: "closed", To: "open", Class: "transient",
		Detail: "timeout", Generation: 4}}
	fCases = []store.Case{{Host: "a.example", At: t0, URL: "http://a.example/", Status: 403,
		Excerpt: "not you, breakwater", Resolved: t0.Add(time.Hour)}}
)

func newRecorder() *recorder {
	r := &recorder{}
	log := func(format string, args ...any) { r.calls = append(r.calls, fmt.Sprintf(format, args...)) }
	r.fakeAPI = fakeAPI{
		StatusFn: func() (*Status, error) { log("Status()"); return fStatus, r.err },
		HostsFn:  func(state string) ([]HostRow, error) { log("Hosts(%s)", state); return fRows, r.err },
		TransitionsFn: func(host string, since time.Time) ([]store.Transition, error) {
			log("Transitions(%s, %s)", host, since.Format(time.RFC3339Nano))
			return fTrans, r.err
		},
		CasesFn:       func() ([]store.Case, error) { log("Cases()"); return fCases, r.err },
		PauseFn:       func(host, reason string) error { log("Pause(%s, %s)", host, reason); return r.err },
		UnpauseFn:     func(host string) error { log("Unpause(%s)", host); return r.err },
		ResolveCaseFn: func(host string) error { log("ResolveCase(%s)", host); return r.err },
	}
	return r
}

// TestEveryCommandRoundTrips sends every command of the table through a
// real socket to a fake API, by its Client method and by its wire name,
// and checks that the arguments arrive and the answer or error comes back.
func TestEveryCommandRoundTrips(t *testing.T) {
	since := t0.Add(-time.Hour)
	tests := []struct {
		cmd   string
		args  Args                         // as the wire carries them
		call  func(c *Client) (any, error) // the Client method
		calls string                       // what the API saw
		want  any                          // nil: the command only acts
	}{
		{"status", Args{}, func(c *Client) (any, error) { return c.Status() }, "Status()", fStatus},
		{"hosts", Args{State: "open"}, func(c *Client) (any, error) { return c.Hosts("open") }, "Hosts(open)", fRows},
		{"transitions", Args{Host: "a.example", Since: since},
			func(c *Client) (any, error) { return c.Transitions("a.example", since) },
			"Transitions(a.example, 2025-03-01T11:00:00Z)", fTrans},
		{"cases", Args{}, func(c *Client) (any, error) { return c.Cases() }, "Cases()", fCases},
		{"pause", Args{Host: "a.example", Reason: "maintenance window"},
			func(c *Client) (any, error) { return nil, c.Pause("a.example", "maintenance window") },
			"Pause(a.example, maintenance window)", nil},
		{"unpause", Args{Host: "a.example"}, func(c *Client) (any, error) { return nil, c.Unpause("a.example") },
			"Unpause(a.example)", nil},
		{"resolve", Args{Host: "b.example:8080"}, func(c *Client) (any, error) { return nil, c.ResolveCase("b.example:8080") },
			"ResolveCase(b.example:8080)", nil},
	}
	api := newRecorder()
	path, _ := serve(t, api)
	client := NewClient(path)
	var tested []string
	for _, tt := range tests {
		tested = append(tested, tt.cmd)
		t.Run(tt.cmd, func(t *testing.T) {
			api.calls, api.err = nil, nil
			got, err := tt.call(client)
			if err != nil {
				t.Fatalf("Client call: %v", err)
			}
			if tt.want != nil && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Client call answered %+v, want %+v", got, tt.want)
			}
			var raw json.RawMessage
			if err := call(path, tt.cmd, tt.args, &raw); err != nil {
				t.Fatalf("call %q: %v", tt.cmd, err)
			}
			if want := []string{tt.calls, tt.calls}; !slices.Equal(api.calls, want) {
				t.Errorf("API saw %q, want %q (by Client, then by name)", api.calls, want)
			}

			api.err = fmt.Errorf("%s: no such host", tt.cmd)
			_, err = tt.call(client)
			if err == nil || err.Error() != api.err.Error() || errors.Is(err, ErrNoServer) {
				t.Errorf("Client call with a failing API = %v, want %q back", err, api.err)
			}
		})
	}
	for name := range commands {
		if !slices.Contains(tested, name) {
			t.Errorf("command %q is in the table but not in this test", name)
		}
	}
	for name := range streams {
		if name != "results" && name != "edges" && name != "inlinks" { // TestResultsStream, TestEdgesStream
			t.Errorf("streaming command %q has no test", name)
		}
	}
}

// Results streams every result the API gives, in order, with the filter
// passed along; an error partway comes back as the error, and an answer
// cut before its end line is an error too. A long stream does not hold up
// the other commands.
func TestResultsStream(t *testing.T) {
	const n = 5000
	var gotFilter []bool
	release := make(chan struct{})
	api := &fakeAPI{
		StatusFn: func() (*Status, error) { return fStatus, nil },
		ResultsFn: func(failedOnly bool, fn func(*store.Result) error) error {
			gotFilter = append(gotFilter, failedOnly)
			for i := range n {
				if i == n/2 && failedOnly {
					<-release // a slow read, half way
				}
				r := &store.Result{URL: fmt.Sprintf("http://a.example/%d", i), Status: 200,
					Title: "comma, \"quote\"\nnewline", Referrer: "http://a.example/"}
				if err := fn(r); err != nil {
					return err
				}
			}
			if !failedOnly {
				return errors.New("disk on fire")
			}
			return nil
		},
	}
	path, _ := serve(t, api)
	client := NewClient(path)
	done := make(chan error, 1)
	var got []*store.Result
	go func() {
		done <- client.Results(true, func(r *store.Result) error { got = append(got, r); return nil })
	}()
	// While that stream waits half way, status still answers.
	if st, err := client.Status(); err != nil || st.Seen != fStatus.Seen {
		t.Fatalf("status during a stream: %+v, %v", st, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Results: %v", err)
	}
	if len(got) != n || got[n-1].URL != "http://a.example/4999" || got[0].Title != "comma, \"quote\"\nnewline" ||
		got[0].Referrer != "http://a.example/" {
		t.Fatalf("got %d results, last %+v", len(got), got[len(got)-1])
	}
	err := client.Results(false, func(*store.Result) error { return nil })
	if err == nil || err.Error() != "disk on fire" {
		t.Errorf("a failing stream = %v, want its error", err)
	}
	if !slices.Equal(gotFilter, []bool{true, false}) {
		t.Errorf("filters seen %v", gotFilter)
	}
	stop := errors.New("reader gave up")
	if err := client.Results(true, func(*store.Result) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("a reader's error = %v, want it back", err)
	}
}

// Edges and Inlinks stream links over the socket with every field, kind
// and rel included (their export names do not read back).
func TestEdgesStream(t *testing.T) {
	edges := []store.Edge{
		{From: "http://a.example/", To: "http://a.example/logo.png", Kind: store.LinkRequisite, Element: "img", Attr: "src"},
		{From: "http://a.example/", To: "http://b.example/", Kind: store.LinkNavigation, Rel: store.RelNofollow | store.RelSponsored,
			Text: "a \"friend\",\nsponsored", Element: "a", Attr: "href"},
		{From: "http://a.example/f", To: "http://a.example/", Kind: store.LinkFrame},
	}
	var askedURL string
	api := &fakeAPI{
		EdgesFn: func(fn func(store.Edge) error) error {
			for _, e := range edges {
				if err := fn(e); err != nil {
					return err
				}
			}
			return nil
		},
		InlinksFn: func(url string, fn func(store.Edge) error) error {
			askedURL = url
			return fn(edges[2])
		},
	}
	path, _ := serve(t, api)
	client := NewClient(path)
	var got []store.Edge
	if err := client.Edges(func(e store.Edge) error { got = append(got, e); return nil }); err != nil {
		t.Fatalf("Edges: %v", err)
	}
	if !slices.Equal(got, edges) {
		t.Fatalf("Edges over the socket:\n got %+v\nwant %+v", got, edges)
	}
	got = nil
	if err := client.Inlinks("http://a.example/", func(e store.Edge) error { got = append(got, e); return nil }); err != nil {
		t.Fatalf("Inlinks: %v", err)
	}
	if askedURL != "http://a.example/" || !slices.Equal(got, edges[2:]) {
		t.Fatalf("Inlinks of %q over the socket: %+v", askedURL, got)
	}
}

func TestServerRefusesBadRequests(t *testing.T) {
	api := newRecorder()
	path, _ := serve(t, api)
	if err := call(path, "reboot", Args{}, new(json.RawMessage)); err == nil ||
		!strings.Contains(err.Error(), `unknown control command "reboot"`) {
		t.Errorf("unknown command: err = %v", err)
	}
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(`{"cmd":"hosts","args":{"state":7}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	var resp response
	if err := json.NewDecoder(conn).Decode(&resp); err != nil || !strings.Contains(resp.Error, "hosts: bad arguments") {
		t.Errorf("bad arguments: answer %+v, %v", resp, err)
	}
	if len(api.calls) != 0 {
		t.Errorf("API called for bad requests: %q", api.calls)
	}
}

func TestSocketPath(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("d", 60), strings.Repeat("f", 60)+".db")
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, db, want string
	}{
		{"absolute short path", filepath.Join(dir, "crawl.db"), filepath.Join(dir, "crawl.db") + ".sock"},
		{"relative path is made absolute", "crawl.db", filepath.Join(wd, "crawl.db") + ".sock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SocketPath(tt.db); got != tt.want {
				t.Errorf("SocketPath(%q) = %q, want %q", tt.db, got, tt.want)
			}
		})
	}
	t.Run("long path goes to the user's directory in the temp dir", func(t *testing.T) {
		got := SocketPath(long)
		want := filepath.Join(os.TempDir(), fmt.Sprintf("breakwater-%d", os.Geteuid()))
		if filepath.Dir(got) != want || !strings.HasSuffix(got, ".sock") {
			t.Errorf("SocketPath(long) = %q, want *.sock in %s", got, want)
		}
		if len(got) >= 100 {
			t.Errorf("SocketPath(long) = %q is %d bytes, too long for a Unix socket", got, len(got))
		}
		if again := SocketPath(long); again != got {
			t.Errorf("SocketPath is not stable: %q then %q", got, again)
		}
		if other := SocketPath(long + "2"); other == got {
			t.Errorf("two long paths share the socket %q", got)
		}
	})
}

func TestCallWithoutServer(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	makeStaleSocket(t, stale)
	for _, path := range []string{filepath.Join(dir, "missing.sock"), stale} {
		start := time.Now()
		_, err := NewClient(path).Status()
		if !errors.Is(err, ErrNoServer) {
			t.Errorf("Status on %s = %v, want ErrNoServer", filepath.Base(path), err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("Status on %s took %s to find nobody", filepath.Base(path), d)
		}
	}
}

// makeStaleSocket leaves a socket file nobody listens on, as a killed crawl does.
func makeStaleSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("stale socket not left behind: %v", err)
	}
}

func TestServeReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.sock")
	makeStaleSocket(t, path)
	serveAt(t, path, newRecorder())
	if st, err := NewClient(path).Status(); err != nil || !reflect.DeepEqual(st, fStatus) {
		t.Fatalf("Status after replacing a stale socket = %+v, %v", st, err)
	}
}

func TestServeRemovesSocketWhenDone(t *testing.T) {
	path, stop := serve(t, newRecorder())
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("socket missing while serving: %v", err)
	}
	stop()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket still there after ctx ended: %v", err)
	}
	if _, err := NewClient(path).Status(); !errors.Is(err, ErrNoServer) {
		t.Errorf("Status after Serve ended = %v, want ErrNoServer", err)
	}
}

func TestBadRequestDoesNotStopServer(t *testing.T) {
	path, _ := serve(t, newRecorder())
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("this is not json\n"))
	conn.Close()
	if _, err := NewClient(path).Status(); err != nil {
		t.Fatalf("Status after a bad request: %v", err)
	}
}

func TestServeFailsOnUnusablePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "c.sock")
	done, err := Serve(context.Background(), path, newRecorder(), discard)
	if err == nil || done != nil {
		t.Fatalf("Serve in a missing directory = %v, %v; want an error", done, err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q should name the path", err)
	}
}

func TestOpen(t *testing.T) {
	t.Run("no crawl: the file", func(t *testing.T) {
		db, path := openDB(t)
		api, closeFn, err := Open(path, func() (ClosableFile, error) { return db, nil })
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := api.(*Offline); !ok {
			t.Errorf("Open without a server = %T, want *Offline", api)
		}
		if st, err := api.Status(); err != nil || st.Running {
			t.Errorf("Status = %+v, %v; want a stopped crawl", st, err)
		}
		if err := closeFn(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	t.Run("no crawl, no file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "missing.db")
		missing := errors.New("--db missing.db: no such file")
		_, _, err := Open(path, func() (ClosableFile, error) { return nil, missing })
		if !errors.Is(err, missing) || !strings.Contains(err.Error(), SocketPath(path)) {
			t.Errorf("Open = %v, want the open error naming the socket", err)
		}
	})
	t.Run("a crawl answers: the socket", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "crawl.db")
		serveAt(t, SocketPath(path), newRecorder())
		api, closeFn, err := Open(path, func() (ClosableFile, error) {
			t.Error("Open opened the file though a crawl answers")
			return nil, errors.New("unexpected")
		})
		if err != nil {
			t.Fatal(err)
		}
		defer closeFn()
		if _, ok := api.(*Client); !ok {
			t.Errorf("Open with a server = %T, want *Client", api)
		}
	})
}

// An answer that ends before its end line (the crawl died mid-export) is
// an error, so an export never looks complete when it is not.
func TestResultsStreamCutShort(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		json.NewDecoder(conn).Decode(new(request))
		conn.Write([]byte(`{"data":{"url":"http://a.example/"}}` + "\n"))
		conn.Close()
	}()
	n := 0
	err = NewClient(path).Results(false, func(*store.Result) error { n++; return nil })
	if err == nil || !strings.Contains(err.Error(), "ended early") || n != 1 {
		t.Fatalf("cut stream: %d results, err %v", n, err)
	}
}
