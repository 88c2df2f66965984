package warc

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCleanRequest(t *testing.T) {
	const m = SecretMarker
	for _, tt := range []struct {
		name     string
		in, want string // "|" stands for CRLF
		keep     string // the result with mask off; "" means as want
	}{
		{name: "origin-form, nothing secret, is left as it is",
			in:   "GET /p?q=1 HTTP/1.1|Host: a.test|User-Agent: bw|Accept-Encoding: gzip||",
			want: "GET /p?q=1 HTTP/1.1|Host: a.test|User-Agent: bw|Accept-Encoding: gzip||"},
		{name: "absolute-form through a proxy: origin-form, proxy headers gone",
			in:   "GET http://a.test:8080/p/q?x=1&y HTTP/1.1|Host: a.test:8080|Proxy-Authorization: Basic dTpwNHNz|User-Agent: bw|Proxy-Connection: keep-alive||",
			want: "GET /p/q?x=1&y HTTP/1.1|Host: a.test:8080|User-Agent: bw||"},
		{name: "a target with no path is /",
			in:   "GET http://127.0.0.1:8080 HTTP/1.1|Host: 127.0.0.1:8080||",
			want: "GET / HTTP/1.1|Host: 127.0.0.1:8080||"},
		{name: "a query but no path",
			in:   "GET HTTP://a.test?q=1 HTTP/1.1|Host: a.test||",
			want: "GET /?q=1 HTTP/1.1|Host: a.test||"},
		{name: "https and user info in the authority go with it",
			in:   "GET https://u:pw@a.test/x HTTP/1.1||",
			want: "GET /x HTTP/1.1||"},
		{name: "asterisk and authority-form targets are left alone",
			in:   "OPTIONS * HTTP/1.1|Host: a.test||",
			want: "OPTIONS * HTTP/1.1|Host: a.test||"},
		{name: "CONNECT target is not absolute-form",
			in:   "CONNECT a.test:443 HTTP/1.1|Host: a.test:443||",
			want: "CONNECT a.test:443 HTTP/1.1|Host: a.test:443||"},
		{name: "a request line that is not three words is left alone",
			in:   "GET http://a.test/x|Host: a.test||",
			want: "GET http://a.test/x|Host: a.test||"},
		{name: "secret values masked, names in any case, others untouched",
			in:   "GET / HTTP/1.1|Host: a.test|authorization: Bearer TOPSECRET|COOKIE: login=l1; session=s1|X-Api-Key:k3y|X-Crawl-Run: 7|Accept-Language: en||",
			want: "GET / HTTP/1.1|Host: a.test|authorization: " + m + "|COOKIE: " + m + "|X-Api-Key:" + m + "|X-Crawl-Run: 7|Accept-Language: en||",
			keep: "GET / HTTP/1.1|Host: a.test|authorization: Bearer TOPSECRET|COOKIE: login=l1; session=s1|X-Api-Key:k3y|X-Crawl-Run: 7|Accept-Language: en||"},
		{name: "proxy credentials go even when secrets are kept",
			in:   "GET http://a.test/ HTTP/1.1|PROXY-AUTHORIZATION: Basic dTpwNHNz|Authorization: Bearer T||",
			want: "GET / HTTP/1.1|Authorization: " + m + "||",
			keep: "GET / HTTP/1.1|Authorization: Bearer T||"},
		{name: "an empty secret value stays empty",
			in:   "GET / HTTP/1.1|Cookie:|Authorization:   ||",
			want: "GET / HTTP/1.1|Cookie:|Authorization:   ||"},
		{name: "a folded secret is masked whole, a folded other field kept",
			in:   "GET / HTTP/1.1|Authorization: Bearer|  TOPSECRET|\tMORE|X-Note: a| b||",
			want: "GET / HTTP/1.1|Authorization: " + m + "|X-Note: a| b||",
			keep: "GET / HTTP/1.1|Authorization: Bearer|  TOPSECRET|\tMORE|X-Note: a| b||"},
		{name: "a folded Proxy-Authorization goes whole",
			in:   "GET / HTTP/1.1|Proxy-Authorization: Basic| dTpwNHNz|Host: a.test||",
			want: "GET / HTTP/1.1|Host: a.test||"},
		{name: "odd lines are left alone, and so are lines folded under them",
			in:   "GET / HTTP/1.1| leading fold|no colon here| Cookie: folded under nothing|Host: a.test||",
			want: "GET / HTTP/1.1| leading fold|no colon here| Cookie: folded under nothing|Host: a.test||"},
		{name: "a space before the colon still names the header",
			in:   "GET / HTTP/1.1|Cookie : a=b||",
			want: "GET / HTTP/1.1|Cookie : " + m + "||",
			keep: "GET / HTTP/1.1|Cookie : a=b||"},
		{name: "bare LF line endings",
			in:   "GET http://a.test/x HTTP/1.1\nCookie: a=b\nProxy-Connection: close\n\n",
			want: "GET /x HTTP/1.1\nCookie: " + m + "\n\n",
			keep: "GET /x HTTP/1.1\nCookie: a=b\n\n"},
		{name: "only the header block is read: a body is kept as sent",
			in:   "GET / HTTP/1.1|Content-Length: 25||Authorization: in a body",
			want: "GET / HTTP/1.1|Content-Length: 25||Authorization: in a body"},
		{name: "a request with no header end is cleaned as far as it goes",
			in:   "GET http://a.test/x HTTP/1.1|Host: a.test|Authorization: Bearer TOPS",
			want: "GET /x HTTP/1.1|Host: a.test|Authorization: " + m,
			keep: "GET /x HTTP/1.1|Host: a.test|Authorization: Bearer TOPS"},
		{name: "cut inside a proxy header",
			in:   "GET http://a.test/x HTTP/1.1|Proxy-Authorization: Bas",
			want: "GET /x HTTP/1.1|"},
		{name: "a request line alone, without an ending",
			in:   "GET http://a.test/x?y HTTP/1.1",
			want: "GET /x?y HTTP/1.1"},
		{name: "empty", in: "", want: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			crlf := func(s string) string { return strings.ReplaceAll(s, "|", "\r\n") }
			in := []byte(crlf(tt.in))
			orig := bytes.Clone(in)
			if got := string(cleanRequest(in, true)); got != crlf(tt.want) {
				t.Errorf("masked:\n got %q\nwant %q", got, crlf(tt.want))
			}
			keep := tt.keep
			if keep == "" {
				if strings.Contains(tt.want, SecretMarker) {
					t.Fatal("a case that masks must say what is kept")
				}
				keep = tt.want
			}
			if got := string(cleanRequest(in, false)); got != crlf(keep) {
				t.Errorf("kept:\n got %q\nwant %q", got, crlf(keep))
			}
			if !bytes.Equal(in, orig) {
				t.Errorf("the input was changed: %q", in)
			}
		})
	}
}

// A request with nothing to clean is returned as it is, without a copy;
// one to clean costs one allocation.
func TestCleanRequestAllocations(t *testing.T) {
	clean := []byte("GET /p HTTP/1.1\r\nHost: a.test\r\nUser-Agent: bw\r\nAccept-Encoding: gzip\r\n\r\n")
	if got := cleanRequest(clean, true); &got[0] != &clean[0] {
		t.Error("a clean request was copied")
	}
	if n := testing.AllocsPerRun(100, func() { cleanRequest(clean, true) }); n != 0 {
		t.Errorf("a clean request: %v allocations, want 0", n)
	}
	dirty := []byte(benchRequest)
	if n := testing.AllocsPerRun(100, func() { cleanRequest(dirty, true) }); n != 1 {
		t.Errorf("a request to clean: %v allocations, want 1", n)
	}
}

// readArchive is every WARC file of dir, decompressed and joined.
func readArchive(t *testing.T, dir string) string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no WARC file in %s (%v)", dir, err)
	}
	var all strings.Builder
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f) // reads every member
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(&all, zr); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return all.String()
}

// The writer cleans every request it archives: masked by default, and the
// warcinfo record says so; kept with KeepSecrets, but never the proxy's
// credentials. Check recomputes the block digests, so they are of the
// record as written.
func TestWriterCleansRequests(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			dir := t.TempDir()
			db := openDB(t, filepath.Join(dir, "c.db"))
			defer db.Close()
			warcs := filepath.Join(dir, "warc")
			w := openWriter(t, db, Options{Dir: warcs, KeepSecrets: keep})
			ex := exchange("http://127.0.0.1:1/a", "body", time.Now())
			ex.Request = []byte("GET http://127.0.0.1:1/a HTTP/1.1\r\nHost: 127.0.0.1:1\r\n" +
				"Proxy-Authorization: Basic YWxpY2U6czNjcmV0\r\nAuthorization: Bearer TOPSECRET\r\nCookie: login=l1\r\n\r\n")
			commit(t, w, db, encodeAll(t, w, ex)...)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if rep, err := Check(warcs); err != nil || !rep.OK() {
				t.Fatalf("check: %v %+v", err, rep)
			}
			all := readArchive(t, warcs)
			for _, leak := range []string{"YWxpY2U6czNjcmV0", "Proxy-Authorization", "GET http://"} {
				if strings.Contains(all, leak) {
					t.Errorf("the archive holds %q:\n%s", leak, all)
				}
			}
			if !strings.Contains(all, "GET /a HTTP/1.1\r\n") {
				t.Errorf("no origin-form request line:\n%s", all)
			}
			wantInfo, secrets := "breakwater-secrets: masked\r\n", []string{"Authorization: " + SecretMarker, "Cookie: " + SecretMarker}
			gone := []string{"TOPSECRET", "login=l1"}
			if keep {
				wantInfo, secrets, gone = "breakwater-secrets: kept\r\n", []string{"Authorization: Bearer TOPSECRET", "Cookie: login=l1"}, []string{SecretMarker}
			}
			// gowarc writes field names in canonical form (Breakwater-Secrets).
			if !strings.Contains(strings.ToLower(all), wantInfo) {
				t.Errorf("the warcinfo record does not say %q:\n%s", wantInfo, all)
			}
			for _, s := range secrets {
				if !strings.Contains(all, s) {
					t.Errorf("the archive does not hold %q:\n%s", s, all)
				}
			}
			for _, s := range gone {
				if strings.Contains(all, s) {
					t.Errorf("the archive holds %q:\n%s", s, all)
				}
			}
		})
	}
}
