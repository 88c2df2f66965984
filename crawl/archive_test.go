package crawl

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"breakwater/backend"
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
		run := func() Summary { return archivedRun(t, r, dir, true) }
		check := func() *warc.Report {
			rep, err := warc.Check(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() {
				t.Fatalf("archive problems %v, unfinished %v", rep.Problems, rep.Unfinished)
			}
			checkIndexed(t, dir, rep)
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
		e, err := New(opts, backend.File(r.db))
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

// warcRecord is one record of an archive as archiveRecords read it.
type warcRecord struct {
	fields map[string]string // the last value of each, by lowercase name
	block  []byte
}

func (r warcRecord) get(name string) string { return r.fields[strings.ToLower(name)] }

// archiveRecords reads the fields of every record in the finished WARC
// files of dir, in file order, with a parser of its own: gzip members,
// each a version line, fields to the empty line, Content-Length bytes of
// block.
func archiveRecords(t *testing.T, dir string) []warcRecord {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no WARC files in %s: %v", dir, err)
	}
	slices.Sort(files) // their names begin with the time they were begun
	var out []warcRecord
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		br := bufio.NewReader(zr)
		for {
			version, err := br.ReadString('\n')
			if err == io.EOF && version == "" {
				break
			}
			if version != "WARC/1.1\r\n" {
				t.Fatalf("%s: record %d starts %q (%v)", name, len(out), version, err)
			}
			rec := warcRecord{fields: map[string]string{}}
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("%s: fields cut short: %v", name, err)
				}
				if line == "\r\n" {
					break
				}
				k, v, _ := strings.Cut(strings.TrimSuffix(line, "\r\n"), ":")
				rec.fields[strings.ToLower(k)] = strings.TrimSpace(v)
			}
			n, err := strconv.Atoi(rec.get("Content-Length"))
			if err != nil {
				t.Fatalf("%s: Content-Length: %v", name, err)
			}
			rec.block = make([]byte, n)
			if _, err := io.ReadFull(br, rec.block); err != nil {
				t.Fatalf("%s: block cut short: %v", name, err)
			}
			if _, err := br.Discard(4); err != nil { // the two CRLFs after it
				t.Fatalf("%s: record cut short: %v", name, err)
			}
			out = append(out, rec)
		}
	}
	return out
}

// archivedRun crawls r's file once with --warc into dir (none if ""), and
// the refresh rig's fetcher giving its answers wire bytes.
func archivedRun(t *testing.T, r *refreshRig, dir string, dedupe bool) Summary {
	t.Helper()
	opts := refreshOptions(aRootURL)
	opts.WARC = WARCOptions{Dir: dir, Dedupe: dedupe}
	opts.Fetcher, opts.Now, opts.Logger = wired{r}, time.Now, rigLogger(t)
	e, err := New(opts, backend.File(r.db))
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

// revisitsReferToResponses checks every revisit in recs against the
// response records: it must name one by its WARC-Target-URI and its
// WARC-Date exactly, as a reader matches them. It returns, by URL, the
// responses' dates and what each revisit refers to ("URI DATE").
func revisitsReferToResponses(t *testing.T, recs []warcRecord) (responses, refersTo map[string][]string) {
	t.Helper()
	responses, refersTo = map[string][]string{}, map[string][]string{}
	full := map[string]bool{}
	for _, rec := range recs {
		if rec.get("WARC-Type") == "response" {
			uri := rec.get("WARC-Target-URI")
			responses[uri] = append(responses[uri], rec.get("WARC-Date"))
			full[uri+" "+rec.get("WARC-Date")] = true
		}
	}
	for _, rec := range recs {
		if rec.get("WARC-Type") != "revisit" {
			continue
		}
		ref := rec.get("WARC-Refers-To-Target-URI") + " " + rec.get("WARC-Refers-To-Date")
		if !full[ref] {
			t.Errorf("the revisit of %s at %s refers to %q, which is no response record", rec.get("WARC-Target-URI"),
				rec.get("WARC-Date"), ref)
		}
		refersTo[rec.get("WARC-Target-URI")] = append(refersTo[rec.get("WARC-Target-URI")], ref)
	}
	return responses, refersTo
}

// A 304 is a revisit of the page's full response record, never of the
// revisit the last 304 made: after two 304s both refer to the first
// response, to its WARC-Date exactly (sub-second). A page whose payload
// was a revisit of an identical one refers, on its 304s, to that one's
// response.
func TestNotModifiedRefersToTheFullResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := site{
			aRootURL:      validated(`"root-1"`, "", "home", "/p/1", "/copy"),
			aURL("/p/1"):  validated(`"one-1"`, "", "one", "/"),
			aURL("/copy"): validated(`"one-1"`, "", "one", "/"), // the same payload as /p/1
		}
		r := newRefreshRig(t, s)
		dir := filepath.Join(t.TempDir(), "warc")
		time.Sleep(123456789 * time.Nanosecond) // dates with a fraction of a second
		archivedRun(t, r, dir, true)
		for range 2 {
			time.Sleep(2*time.Hour + 10*time.Millisecond)
			mark := r.mark()
			archivedRun(t, r, dir, true)
			for _, a := range r.since(mark) {
				if a.URL != aURL("/robots.txt") && a.IfNoneMatch == "" {
					t.Errorf("refresh of %s was unconditional: its first capture is archived", a.URL)
				}
			}
		}
		responses, refersTo := revisitsReferToResponses(t, archiveRecords(t, dir))
		root := aRootURL + " " + strings.Join(responses[aRootURL], ",")
		if len(responses[aRootURL]) != 1 || !strings.Contains(root, ".") ||
			!slices.Equal(refersTo[aRootURL], []string{root, root}) {
			t.Errorf("the root: responses %v, revisits refer to %v; want one response with a sub-second date, "+
				"and both 304s referring to it", responses[aRootURL], refersTo[aRootURL])
		}
		// Of /p/1 and /copy one was archived in full, the other as a
		// revisit of it; their 304s refer to that one response.
		if n := len(responses[aURL("/p/1")]) + len(responses[aURL("/copy")]); n != 1 {
			t.Fatalf("responses %v: want one of the identical payload", responses)
		}
		original := aURL("/p/1")
		if len(responses[original]) == 0 {
			original = aURL("/copy")
		}
		want := original + " " + responses[original][0]
		for _, u := range []string{aURL("/p/1"), aURL("/copy")} {
			revisits := 2 // its two 304s
			if u != original {
				revisits++ // and its first capture
			}
			if got := refersTo[u]; len(got) != revisits || slices.ContainsFunc(got, func(ref string) bool { return ref != want }) {
				t.Errorf("%s: revisits refer to %v; want %d, each to %q", u, got, revisits, want)
			}
		}
		if rep, err := warc.Check(dir); err != nil || !rep.OK() {
			t.Fatalf("check: %v %+v", err, rep)
		}
	})
}

// A page first fetched without --warc is in no archive: its refresh with
// --warc asks for it in full (no validators), and the archive gets a
// response record; the next refresh is conditional again, and its 304
// refers to that response.
func TestRefreshOfAPageInNoArchiveIsUnconditional(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := site{
			aRootURL:     validated(`"root-1"`, "", "home", "/p/1"),
			aURL("/p/1"): validated("", time.Now().UTC().Format(http.TimeFormat), "one", "/"),
		}
		r := newRefreshRig(t, s)
		dir := filepath.Join(t.TempDir(), "warc")
		archivedRun(t, r, "", false)
		time.Sleep(2 * time.Hour)
		mark := r.mark()
		archivedRun(t, r, dir, false)
		for _, a := range r.since(mark) {
			if a.IfNoneMatch != "" || a.IfModifiedSince != "" {
				t.Errorf("the refresh of %s, in no archive, was conditional: %+v", a.URL, a)
			}
		}
		for u, res := range r.results() {
			if res.Status != 200 || res.Archived.URI != u || !res.Archived.Date.Equal(res.FetchedAt) {
				t.Errorf("%s after a refresh in full: %+v; want 200, archived as fetched", u, res)
			}
		}
		responses, refersTo := revisitsReferToResponses(t, archiveRecords(t, dir))
		for _, u := range []string{aRootURL, aURL("/p/1")} {
			if len(responses[u]) != 1 || len(refersTo[u]) != 0 {
				t.Errorf("%s: responses %v, revisits %v; want one response", u, responses[u], refersTo[u])
			}
		}

		time.Sleep(2 * time.Hour)
		mark = r.mark()
		archivedRun(t, r, dir, false)
		if got := pagesAsked(r.since(mark)); len(got) != 2 {
			t.Fatalf("third run asked %v, want both pages", got)
		}
		for _, a := range r.since(mark) {
			if !strings.HasSuffix(a.URL, "/robots.txt") && a.IfNoneMatch == "" && a.IfModifiedSince == "" {
				t.Errorf("the refresh of %s, archived in full since, was unconditional", a.URL)
			}
		}
		responses, refersTo = revisitsReferToResponses(t, archiveRecords(t, dir))
		for _, u := range []string{aRootURL, aURL("/p/1")} {
			want := []string{u + " " + strings.Join(responses[u], ",")}
			if len(responses[u]) != 1 || !slices.Equal(refersTo[u], want) {
				t.Errorf("%s: responses %v, revisits refer to %v; want one response and a 304 referring to it",
					u, responses[u], refersTo[u])
			}
		}
	})
}

// checkIndexed checks that the run left the archive's index: a line for
// each response and revisit record, of its URL, in a finished file.
func checkIndexed(t *testing.T, dir string, rep *warc.Report) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, warc.IndexName))
	if err != nil {
		t.Fatalf("no index after the run: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if !slices.IsSorted(lines) {
		t.Errorf("index not sorted:\n%s", data)
	}
	urls := map[string]int{}
	for _, line := range lines {
		parts := strings.SplitN(line, " ", 3)
		var fields struct{ URL, Filename string }
		if len(parts) != 3 || json.Unmarshal([]byte(parts[2]), &fields) != nil || parts[0] != warc.SURT(fields.URL) {
			t.Fatalf("index line %q", line)
		}
		if _, err := os.Stat(filepath.Join(dir, fields.Filename)); err != nil {
			t.Errorf("index line of a file not finished: %v", err)
		}
		urls[fields.URL]++
	}
	if fmt.Sprint(urls) != fmt.Sprint(rep.Responses) {
		t.Errorf("index lines by URL %v, want the response and revisit records %v", urls, rep.Responses)
	}
}

// An index that cannot be written is logged and fails nothing: the
// archive is whole, and the run ends as it would have.
func TestIndexFailureLeavesTheRunAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRefreshRig(t, site{aRootURL: validated("", "", "home")})
		dir := filepath.Join(t.TempDir(), "warc")
		if err := os.MkdirAll(filepath.Join(dir, warc.IndexName, "in-the-way"), 0o755); err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		opts := refreshOptions(aRootURL)
		opts.WARC = WARCOptions{Dir: dir}
		opts.Fetcher, opts.Now, opts.Logger = wired{r}, time.Now, slog.New(slog.NewTextHandler(&log, nil))
		e, err := New(opts, backend.File(r.db))
		if err != nil {
			t.Fatal(err)
		}
		r.fake.refuse = e.circuitOpen
		sum, err := e.Run(t.Context())
		if err != nil || !sum.Exhausted || sum.Counts.Fetched != 1 {
			t.Fatalf("run: %+v, %v; want it done, as without the index", sum, err)
		}
		if !strings.Contains(log.String(), "the index could not be written") || !strings.Contains(log.String(), "level=ERROR") {
			t.Errorf("log %s; want the index's failure told", log.String())
		}
		if rep, err := warc.Check(dir); err != nil || !rep.OK() || rep.Responses[aRootURL] != 1 {
			t.Errorf("archive %+v, %v", rep, err)
		}
	})
}
