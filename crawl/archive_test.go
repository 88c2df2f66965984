package crawl

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"breakwater/fetch"
	"breakwater/spool"
	"breakwater/warc"
)

// wired gives the fake's answers the wire bytes a recording fetcher would.
type wired struct{ inner Fetcher }

func (w wired) Fetch(ctx context.Context, req fetch.Request) *fetch.Response {
	resp := w.inner.Fetch(ctx, req)
	if resp.Status == 0 {
		return resp
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", resp.Status, http.StatusText(resp.Status))
	resp.Header.Write(&b)
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(resp.Body))
	b.Write(resp.Body)
	resp.Wire = &fetch.Wire{Request: []byte("GET " + req.URL + " HTTP/1.1\r\n\r\n"), Response: spool.Of(b.Bytes()), RemoteIP: "127.0.0.1"}
	return resp
}

// The archive follows the crawl: each page done is one response record, a
// page whose payload was archived before is a revisit of it, a refresh's
// 304 is a server-not-modified revisit, and a changed page a new response.
func TestArchiveFollowsTheCrawl(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := site{
			aRootURL:      validated(`"root-1"`, "", "home", "/p/1", "/p/2", "/copy"),
			aURL("/p/1"):  validated(`"one-1"`, "", "one", "/"),
			aURL("/p/2"):  validated(`"two-1"`, "", "two", "/"),
			aURL("/copy"): validated(`"one-1"`, "", "one", "/"), // the same payload as /p/1
		}
		r := newRefreshRig(t, s)
		dir := filepath.Join(t.TempDir(), "warc")
		run := func() Summary {
			opts := refreshOptions(aRootURL)
			opts.WARC = WARCOptions{Dir: dir, Dedupe: true}
			opts.Fetcher, opts.Now, opts.Logger = wired{r}, time.Now, rigLogger(t)
			e, err := New(opts, r.db)
			if err != nil {
				t.Fatal(err)
			}
			r.fake.refuse = e.circuitOpen
			sum, err := e.Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			return sum
		}
		check := func() *warc.Report {
			rep, err := warc.Check(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() {
				t.Fatalf("archive problems %v, unfinished %v", rep.Problems, rep.Unfinished)
			}
			return rep
		}
		run()
		rep := check()
		for _, u := range []string{aRootURL, aURL("/p/1"), aURL("/p/2"), aURL("/copy")} {
			if rep.Responses[u] != 1 {
				t.Errorf("%s in %d records after the first run, want 1", u, rep.Responses[u])
			}
		}
		if rep.Records["revisit"] != 1 {
			t.Errorf("records %v: the copy of /p/1 should be one revisit", rep.Records)
		}

		time.Sleep(2 * time.Hour)
		r.set(aURL("/p/2"), validated(`"two-2"`, "", "two, changed", "/"))
		run()
		rep = check()
		// 304s for /, /p/1 and /copy; /p/2 changed: a full response.
		if rep.Records["revisit"] != 1+3 || rep.Records["response"] != 4+1 {
			t.Errorf("records after the refresh %v, want 4 revisits and 5 responses (robots.txt included)", rep.Records)
		}
		if rep.Files != 2 {
			t.Errorf("%d files: each run should have written its own", rep.Files)
		}
	})
}

// robots.txt answers are archived as they come, once each: a URL that
// fails because its host's robots.txt stays unavailable adds no copy.
func TestArchiveRobotsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := site{
			aRootURL:            validated("", "", "home"),
			aURL("/robots.txt"): page{status: 503},
		}
		r := newRefreshRig(t, s)
		dir := filepath.Join(t.TempDir(), "warc")
		opts := refreshOptions(aRootURL)
		opts.WARC = WARCOptions{Dir: dir}
		opts.Fetcher, opts.Now, opts.Logger = wired{r}, time.Now, rigLogger(t)
		e, err := New(opts, r.db)
		if err != nil {
			t.Fatal(err)
		}
		r.fake.refuse = e.circuitOpen
		if _, err := e.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		asked := 0
		for _, a := range r.since(0) {
			if a.URL == aURL("/robots.txt") {
				asked++
			}
		}
		rep, err := warc.Check(dir)
		if err != nil || !rep.OK() {
			t.Fatalf("check: %v %+v", err, rep)
		}
		if asked == 0 || rep.Responses[aURL("/robots.txt")] != asked || rep.Responses[aRootURL] != 0 {
			t.Errorf("robots.txt asked %d times, archived %d times; the page archived %d times (never asked)",
				asked, rep.Responses[aURL("/robots.txt")], rep.Responses[aRootURL])
		}
	})
}
