package warc

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// warcio finds the independent reader these tests check the index with:
// node and the npm package warcio, which .ci/run installs with
// `npm install --prefix $BREAKWATER_NPM_DIR/warcio warcio@2.4.11`
// (BREAKWATER_NPM_DIR defaults to breakwater-npm in the user's cache
// directory). Without them the
// tests skip, and under CI they fail. It returns a command runner.
func warcio(t *testing.T) func(stdin string, args ...string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	dir := os.Getenv("BREAKWATER_NPM_DIR")
	if dir == "" {
		cache, _ := os.UserCacheDir()
		dir = filepath.Join(cache, "breakwater-npm")
	}
	pkg := filepath.Join(dir, "warcio")
	if err == nil {
		_, err = os.Stat(filepath.Join(pkg, "node_modules", "warcio", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node and npm warcio are needed (.ci/run installs them into %s): %v", pkg, err)
		}
		t.Skipf("node and npm warcio not installed (in %s): %v", pkg, err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "warcio.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	return func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(node, append([]string{script, pkg}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("warcio %v: %v\n%s", args, err, stderr.String())
		}
		return string(out)
	}
}

// The keys are the ones warcio.js, and so ReplayWeb.page, computes for a
// lookup.
func TestSURTMatchesWarcio(t *testing.T) {
	run := warcio(t)
	var urls []string
	for _, c := range surtCases {
		// A space would split a line's key, where warcio.js keeps it: the
		// one rule of ours, for URLs no crawl fetches.
		if !strings.Contains(c.url, " ") {
			urls = append(urls, c.url)
		}
	}
	urls = append(urls, surtOnlyAgainstWarcio...)
	got := strings.Split(strings.TrimSuffix(run(strings.Join(urls, "\n")+"\n", "surt"), "\n"), "\n")
	if len(got) != len(urls) {
		t.Fatalf("warcio gave %d keys for %d URLs", len(got), len(urls))
	}
	for i, u := range urls {
		if ours := SURT(u); ours != got[i] {
			t.Errorf("SURT(%q) = %q, warcio.js getSurt gives %q", u, ours, got[i])
		}
	}
}

// surtOnlyAgainstWarcio are URLs whose keys are checked against
// warcio.js alone: what its URL parser makes of them is its business.
var surtOnlyAgainstWarcio = []string{
	"http://127.0.0.1:8080/a%2Fb/%7Euser/caf%C3%A9?q=%E2%82%AC",
	"http://xn--caf-dma.example/",
	"https://WWW.Example.COM/",
	"http://www.example.com./trailing-dot",
	"http://example.com/?",
	"http://example.com/?&&b=1&",
	"http://example.com/path;params?x=1#frag",
	"http://[::1]:8080/v6",
	"http://user:pw@www.example.com:81/login",
	"https://example.com:443/default-port",
	"http://0x7f.1/hex-ip",
	"http://example.com/\u00e9t\u00e9?\u00e9=1",
	"http://example.com/a/./b/../c//d",
	"http://example.com/Q?B=2&a=1&A=0",
}

// An index checked with warcio.js, the reader ReplayWeb.page uses: each
// line's offset and length, read alone as a replay reads them, hold
// exactly the response or revisit of its URL at its time; and warcio's
// own index of every file (offsets and lengths of the members it reads
// the records from, keys, timestamps, types, statuses) is ours. An
// uncompressed WARC file is indexed the same.
func TestIndexAgainstWarcio(t *testing.T) {
	run := warcio(t)
	dir := t.TempDir()
	uris := mixedArchive(t, dir, 3000, 0)
	warcs := filepath.Join(dir, "warc")
	plain := filepath.Join(warcs, "plain.warc")
	gunzipFile(t, warcNames(t, warcs)[0], plain)
	st, err := WriteIndex(warcs)
	if err != nil {
		t.Fatal(err)
	}
	if st.Read != 1 {
		t.Errorf("stats %+v: want the uncompressed file, which had no index, read", st)
	}
	index, err := os.ReadFile(filepath.Join(warcs, IndexName))
	if err != nil {
		t.Fatal(err)
	}
	lines := parseCDXJ(t, index)
	var plainLines int
	for _, l := range lines {
		if l.fields["filename"] == "plain.warc" {
			plainLines++
		}
	}
	if len(lines) != len(uris)+plainLines || plainLines == 0 {
		t.Fatalf("%d lines, %d of them the uncompressed file's; want %d and its", len(lines), plainLines, len(uris))
	}

	found := strings.Split(strings.TrimSuffix(run(string(index), "slices", warcs), "\n"), "\n")
	if len(found) != len(lines) {
		t.Fatalf("warcio read %d slices for %d lines", len(found), len(lines))
	}
	for i, l := range lines {
		var f struct {
			Type, URI, Date, Error string
			Status                 any // a number, or "" when there is no HTTP head
			Next                   *string
		}
		if err := json.Unmarshal([]byte(found[i]), &f); err != nil {
			t.Fatalf("warcio said %q: %v", found[i], err)
		}
		typ := "response"
		if l.fields["mime"] == "warc/revisit" {
			typ = "revisit"
		}
		if f.Status == "" {
			f.Status = nil
		}
		var status any
		if s, ok := l.fields["status"]; ok {
			n, _ := strconv.Atoi(s)
			status = float64(n)
		}
		if f.Error != "" || f.Type != typ || f.URI != l.fields["url"] || timestamp14(f.Date) != l.timestamp || f.Status != status || f.Next != nil {
			t.Errorf("line %q:\nwarcio read there %s", l.raw, found[i])
		}
	}

	names := append(warcNames(t, warcs), plain)
	theirs := parseCDXJ(t, []byte(run("", append([]string{"index"}, names...)...)))
	if len(theirs) != len(lines) {
		t.Errorf("warcio indexed %d records, we %d", len(theirs), len(lines))
	}
	ours := map[string]cdxjLine{}
	for _, l := range lines {
		ours[l.fields["filename"]+" "+l.fields["offset"]] = l
	}
	for _, w := range theirs {
		o, ok := ours[w.fields["filename"]+" "+w.fields["offset"]]
		if !ok {
			t.Errorf("warcio indexed a record we did not: %q", w.raw)
			continue
		}
		same := o.key == w.key && o.timestamp == w.timestamp
		for _, k := range []string{"url", "mime", "status", "length"} {
			same = same && o.fields[k] == w.fields[k]
		}
		// warcio leaves the algorithm out of the digest; pywb's indexer
		// keeps it, as we do, and ReplayWeb.page reads both.
		if d, ok := o.fields["digest"]; ok != (w.fields["digest"] != "") || strings.TrimPrefix(d, "sha1:") != w.fields["digest"] {
			same = false
		}
		if !same {
			t.Errorf("ours:   %swarcio: %s", o.raw, w.raw)
		}
	}
}

// gunzipFile writes the records of a .warc.gz file to an uncompressed
// WARC file at to.
func gunzipFile(t *testing.T, from, to string) {
	t.Helper()
	f, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
