package e2e

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"breakwater/cli"
	"breakwater/redisstore/redistest"
	"breakwater/store"
	"breakwater/warc"
)

// waczContents is a WACZ read back with archive/zip alone.
type waczContents struct {
	entries map[string]*zip.File
	offsets map[string]int64 // where each entry's data starts in the file
	data    map[string][]byte
	pages   []waczPage
}

type waczPage struct {
	ID, URL, Title, TS string
}

func readWACZ(t *testing.T, path string) *waczContents {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer zr.Close()
	w := &waczContents{entries: map[string]*zip.File{}, offsets: map[string]int64{}, data: map[string][]byte{}}
	for _, f := range zr.File {
		if w.offsets[f.Name], err = f.DataOffset(); err != nil {
			t.Fatal(err)
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("read %s: %v", f.Name, err)
		}
		w.entries[f.Name], w.data[f.Name] = f, b
	}
	lines := strings.Split(strings.TrimSuffix(string(w.data["pages/pages.jsonl"]), "\n"), "\n")
	if lines[0] != `{"format":"json-pages-1.0","id":"pages","title":"All Pages"}` {
		t.Errorf("pages.jsonl starts %q", lines[0])
	}
	for _, l := range lines[1:] {
		var p waczPage
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatalf("page line %q: %v", l, err)
		}
		w.pages = append(w.pages, p)
	}
	return w
}

// checkHashes recomputes every resource's sha256 and size, and
// datapackage.json's against datapackage-digest.json, with no help from
// the wacz package.
func (w *waczContents) checkHashes(t *testing.T) {
	t.Helper()
	sum := func(b []byte) string { h := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(h[:]) }
	var dp struct {
		Profile     string `json:"profile"`
		WACZVersion string `json:"wacz_version"`
		Resources   []struct {
			Path  string `json:"path"`
			Hash  string `json:"hash"`
			Bytes int    `json:"bytes"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(w.data["datapackage.json"], &dp); err != nil {
		t.Fatalf("datapackage.json: %v", err)
	}
	if dp.Profile != "data-package" || dp.WACZVersion != "1.1.1" {
		t.Errorf("datapackage.json: profile %q, wacz_version %q", dp.Profile, dp.WACZVersion)
	}
	listed := map[string]bool{"datapackage.json": true, "datapackage-digest.json": true}
	for _, r := range dp.Resources {
		listed[r.Path] = true
		if got := sum(w.data[r.Path]); got != r.Hash || len(w.data[r.Path]) != r.Bytes {
			t.Errorf("%s: %s %d bytes, datapackage.json says %s %d", r.Path, got, len(w.data[r.Path]), r.Hash, r.Bytes)
		}
	}
	for name := range w.entries {
		if !listed[name] {
			t.Errorf("%s is in the zip but not in datapackage.json", name)
		}
	}
	var digest struct{ Path, Hash string }
	if err := json.Unmarshal(w.data["datapackage-digest.json"], &digest); err != nil {
		t.Fatal(err)
	}
	if digest.Path != "datapackage.json" || digest.Hash != sum(w.data["datapackage.json"]) {
		t.Errorf("datapackage-digest.json %+v", digest)
	}
}

// warcNames are the archive/ entries, by base name.
func (w *waczContents) warcNames() []string {
	var out []string
	for name := range w.entries {
		if base, ok := strings.CutPrefix(name, "archive/"); ok {
			out = append(out, base)
		}
	}
	slices.Sort(out)
	return out
}

// htmlPages are the results a WACZ lists: 2xx HTML, by URL.
func htmlPages(t *testing.T, db string) map[string]*store.Result {
	out := map[string]*store.Result{}
	for u, r := range results(t, db) {
		if r.ErrorClass == "" && r.Status/100 == 2 && strings.HasPrefix(r.ContentType, "text/html") {
			out[u] = r
		}
	}
	return out
}

// A finished crawl packaged: every hash recomputed matches, the WARC files
// are stored byte for byte, the pages are the crawl's HTML pages with
// seeds first; one byte changed fails --verify, naming the file.
func TestWACZ(t *testing.T) {
	site := startSite(t, 2, 12)
	db := tempDB(t)
	dir := filepath.Join(t.TempDir(), "warc")
	mustRun(t, cli.ExitOK, crawlArgs(db, append([]string{"--warc", dir}, site.Roots()...)...)...)
	out := filepath.Join(t.TempDir(), "crawl.wacz")
	r := mustRun(t, cli.ExitOK, "wacz", "--db", db, "-o", out, "--title", "Two hosts") // --warc: the crawl's
	w := readWACZ(t, out)
	w.checkHashes(t)

	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(files) == 0 || len(w.warcNames()) != len(files) {
		t.Fatalf("archive/ holds %v, the directory %v", w.warcNames(), files)
	}
	for _, f := range files {
		name := "archive/" + filepath.Base(f)
		src, _ := os.ReadFile(f)
		if e := w.entries[name]; e == nil || e.Method != zip.Store || !bytes.Equal(w.data[name], src) {
			t.Errorf("%s: not the file stored as it is", name)
		}
	}
	index, _ := os.ReadFile(filepath.Join(dir, "index.cdxj"))
	if !bytes.Equal(w.data["indexes/index.cdxj"], index) {
		t.Errorf("indexes/index.cdxj is not the archive's index")
	}

	want := htmlPages(t, db)
	roots := site.Roots()
	if len(w.pages) != len(want) || len(w.pages) <= len(roots) {
		t.Fatalf("%d pages listed, the crawl has %d HTML pages", len(w.pages), len(want))
	}
	for i, p := range w.pages {
		res := want[p.URL]
		if res == nil {
			t.Errorf("page %s is not an HTML page of the crawl", p.URL)
			continue
		}
		if isRoot := slices.Contains(roots, p.URL); isRoot != (i < len(roots)) {
			t.Errorf("page %d is %s: the %d seeds must come first", i, p.URL, len(roots))
		}
		ts, err := time.Parse(time.RFC3339, p.TS)
		if err != nil || ts.Sub(res.FetchedAt).Abs() >= time.Millisecond || p.Title != res.Title || p.Title == "" {
			t.Errorf("page %+v, the result fetched at %s titled %q", p, res.FetchedAt, res.Title)
		}
	}
	if !strings.Contains(r.stdout, fmt.Sprintf("%d pages (%d seeds)", len(want), len(roots))) {
		t.Errorf("wacz printed %q", r.stdout)
	}

	if r := mustRun(t, cli.ExitOK, "wacz", "--verify", out); !strings.Contains(r.stdout, "ok") {
		t.Errorf("--verify of a whole WACZ: %s", r)
	}
	// One byte changed in the middle of a WARC file.
	data, _ := os.ReadFile(out)
	name := "archive/" + filepath.Base(files[0])
	data[w.offsets[name]+int64(w.entries[name].CompressedSize64)/2] ^= 0x01
	bad := filepath.Join(t.TempDir(), "bad.wacz")
	writeFile(t, bad, string(data))
	r = runCLI(t, t.Context(), "wacz", "--verify", bad)
	if r.code != cli.ExitError || !strings.Contains(r.stdout, "problem: archive/"+filepath.Base(files[0])+": hash sha256:") {
		t.Errorf("--verify of a WACZ with one byte changed: %s", r)
	}
}

// A WACZ is not made of an archive warc-check finds a problem in; the
// refusal names the problem and leaves no file.
func TestWACZRefusesADamagedArchive(t *testing.T) {
	site := startSite(t, 1, 5)
	db := tempDB(t)
	dir := filepath.Join(t.TempDir(), "warc")
	mustRun(t, cli.ExitOK, crawlArgs(db, append([]string{"--warc", dir}, site.Roots()...)...)...)
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	data, _ := os.ReadFile(files[0])
	data[len(data)-6] ^= 0xff // in the last member's CRC-32
	writeFile(t, files[0], string(data))
	outDir := t.TempDir()
	r := runCLI(t, t.Context(), "wacz", "--db", db, "--warc", dir, "-o", filepath.Join(outDir, "crawl.wacz"))
	if r.code != cli.ExitError || !strings.Contains(r.stderr, "warc-check finds") ||
		!strings.Contains(r.stderr, filepath.Base(files[0])) {
		t.Errorf("wacz of a damaged archive: %s", r)
	}
	if left, _ := os.ReadDir(outDir); len(left) != 0 {
		t.Errorf("a refused WACZ left %v", left)
	}
	if r := runCLI(t, t.Context(), "wacz", "--db", db, "--warc", t.TempDir(), "-o", filepath.Join(outDir, "x.wacz")); r.code != cli.ExitError ||
		!strings.Contains(r.stderr, "no finished WARC file") {
		t.Errorf("wacz of an empty directory: %s", r)
	}
}

// An unfinished file is left out, with the pages fetched since it was
// begun; usage errors are usage errors.
func TestWACZLeavesOutUnfinishedFiles(t *testing.T) {
	site := startSite(t, 1, 8)
	db := tempDB(t)
	dir := filepath.Join(t.TempDir(), "warc")
	mustRun(t, cli.ExitOK, crawlArgs(db, append([]string{"--warc", dir}, site.Roots()...)...)...)
	pages := htmlPages(t, db)
	var last time.Time
	for _, p := range pages {
		if p.FetchedAt.After(last) {
			last = p.FetchedAt
		}
	}
	// An open file begun when the last page was fetched.
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	fmt.Fprintf(zw, "WARC/1.1\r\nWARC-Type: warcinfo\r\nWARC-Date: %s\r\nContent-Length: 0\r\n\r\n\r\n\r\n", last.UTC().Format(time.RFC3339Nano))
	zw.Close()
	open := filepath.Join(dir, "breakwater-99999999999999-00099-test.warc.gz.open")
	writeFile(t, open, buf.String()+"half a record")
	out := filepath.Join(t.TempDir(), "crawl.wacz")
	mustRun(t, cli.ExitOK, "wacz", "--db", db, "-o", out)
	w := readWACZ(t, out)
	w.checkHashes(t)
	for _, name := range w.warcNames() {
		if strings.HasSuffix(name, ".open") {
			t.Errorf("the unfinished %s is packaged", name)
		}
	}
	listed := map[string]bool{}
	for _, p := range w.pages {
		listed[p.URL] = true
	}
	for u, p := range pages {
		if listed[u] == p.FetchedAt.Equal(last) {
			t.Errorf("%s fetched at %s, the open file begun at %s: listed %v", u, p.FetchedAt, last, listed[u])
		}
	}

	for _, args := range [][]string{
		{"wacz", "--db", db},
		{"wacz", "--verify", out, "-o", out},
		{"wacz", "--db", db, "-o", out, "extra"},
		{"wacz", "--db", filepath.Join(t.TempDir(), "missing.db"), "-o", out},
	} {
		if r := runCLI(t, t.Context(), args...); r.code != cli.ExitUsage {
			t.Errorf("%v: %s", args, r)
		}
	}
	noWARC := tempDB(t)
	mustRun(t, cli.ExitOK, crawlArgs(noWARC, site.Roots()...)...)
	if r := runCLI(t, t.Context(), "wacz", "--db", noWARC, "-o", out); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "run without --warc") {
		t.Errorf("wacz of a crawl without --warc: %s", r)
	}
}

// While a crawl runs and rotates its files, a WACZ is made of the files
// finished so far (through the crawl's control socket), and verifies; the
// pages it lists are in the files it holds, but for a page in flight as
// the files were listed.
func TestWACZWhileCrawling(t *testing.T) {
	bin := buildBinary(t)
	const pages = 300
	// Padding gzip cannot shrink much, so that a 1 MiB file is full after
	// a few pages.
	noise := make([]byte, 60<<10)
	rand.NewChaCha8([32]byte{3, 4}).Read(noise)
	pad := hex.EncodeToString(noise)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p/"))
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><head><title>Page %d</title></head><body><!-- %s -->", n, pad)
		if n+1 < pages {
			fmt.Fprintf(w, `<a href="/p/%d">next</a>`, n+1)
		}
	}))
	defer srv.Close()
	db := tempDB(t)
	dir := filepath.Join(t.TempDir(), "warc")
	crawl := exec.Command(bin, crawlArgs(db, "--delay", "20ms", "--max-depth", "-1", "--warc", dir, "--warc-size", "1048576", "--max-body", "1048576", srv.URL+"/p/0")...)
	var crawlOut bytes.Buffer
	crawl.Stdout, crawl.Stderr = &crawlOut, &crawlOut
	if err := crawl.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- crawl.Wait() }()
	defer func() {
		crawl.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("the crawl's output:\n%s\nthe archive: %v", crawlOut.String(), dirNames(dir))
		}
	}()
	waitFor(t, 30*time.Second, "two finished WARC files", func() bool {
		files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
		return len(files) >= 2
	})
	out := filepath.Join(t.TempDir(), "crawl.wacz")
	mustRun(t, cli.ExitOK, "wacz", "--db", db, "-o", out)
	select {
	case err := <-exited:
		exited <- err // for the deferred wait
		t.Fatalf("the crawl ended (%v) before the WACZ was made: the test proves nothing", err)
	default:
	}
	mustRun(t, cli.ExitOK, "wacz", "--verify", out)
	w := readWACZ(t, out)
	w.checkHashes(t)

	// The packaged files, read back by warc-check, hold the pages listed.
	unpacked := t.TempDir()
	for _, name := range w.warcNames() {
		if strings.HasSuffix(name, ".open") {
			t.Fatalf("the unfinished %s is packaged", name)
		}
		writeFile(t, filepath.Join(unpacked, name), string(w.data["archive/"+name]))
	}
	rep, err := warc.Check(unpacked)
	if err != nil || !rep.OK() {
		t.Fatalf("warc-check of the packaged files: %+v, %v", rep, err)
	}
	missing := 0
	for _, p := range w.pages {
		if rep.Responses[p.URL] == 0 {
			missing++
		}
	}
	if missing > 1 || len(w.pages) < 2 || w.pages[0].URL != srv.URL+"/p/0" {
		t.Errorf("%d of %d pages listed are in no packaged file (at most the one in flight may be); first %+v",
			missing, len(w.pages), w.pages[0])
	}
}

// A fleet's crawl is packaged from its store, with the --warc directory
// stored with the crawl.
func TestWACZOfAFleet(t *testing.T) {
	rs := redistest.Start(t)
	site := startSite(t, 2, 6)
	dir := filepath.Join(t.TempDir(), "warc")
	mustRun(t, cli.ExitOK, fleetArgs(rs.URL(), []string{"--warc", dir, "--log-level", "warn"}, site.Roots()...)...)
	out := filepath.Join(t.TempDir(), "fleet.wacz")
	mustRun(t, cli.ExitOK, "wacz", "--store", rs.URL(), "-o", out)
	mustRun(t, cli.ExitOK, "wacz", "--verify", out)
	w := readWACZ(t, out)
	w.checkHashes(t)
	if len(w.warcNames()) == 0 || len(w.pages) != 2*6 {
		t.Errorf("the fleet's WACZ holds %v and %d pages", w.warcNames(), len(w.pages))
	}
}
