package e2e

import (
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"breakwater/cli"
	"breakwater/fetch/fetchtest"
	"breakwater/warc"
)

// The credentials these tests give, each distinctive enough that finding
// it anywhere in an archive means it leaked.
const (
	testToken       = "Bearer TOPSECRET-t0k3n"
	testCookieValue = "c00kieVALUE"
	proxyUser       = "alice"
	proxyPassword   = "pr0xyPa55w0rd"
)

// credRequest is what one request brought a credHost.
type credRequest struct {
	path, authorization, cookie string
}

// credHost is a loopback host that records the credentials of every
// request it serves.
type credHost struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []credRequest
}

func startCredHost(t *testing.T, ip string, h func(w http.ResponseWriter, r *http.Request)) *credHost {
	t.Helper()
	c := &credHost{}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.seen = append(c.seen, credRequest{r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("Cookie")})
		c.mu.Unlock()
		h(w, r)
	}))
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	c.srv.Listener.Close()
	c.srv.Listener = ln
	c.srv.Start()
	t.Cleanup(c.srv.Close)
	return c
}

func (c *credHost) requests() []credRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]credRequest(nil), c.seen...)
}

// paths is every path the host was asked for.
func (c *credHost) paths() []string {
	var out []string
	for _, r := range c.requests() {
		out = append(out, r.path)
	}
	return out
}

// credSite is two hosts on two loopback addresses, so that a cookie for
// one is not a cookie for the other (cookies ignore ports). The seed is
// seed's /, which sets a cookie and links to a page of its own, a page of
// other and a redirect to other; seed's robots.txt redirects to other.
type credSite struct {
	seed, other *credHost
	cookies     string // a cookies.txt naming both hosts
}

func startCredSite(t *testing.T) *credSite {
	t.Helper()
	s := &credSite{}
	s.other = startCredHost(t, "127.0.0.2", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/seed-robots.txt":
			fmt.Fprint(w, "User-agent: *\nAllow: /\n")
		default:
			fmt.Fprint(w, "<p>other</p>")
		}
	})
	s.seed = startCredHost(t, "127.0.0.1", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.Redirect(w, r, s.other.srv.URL+"/seed-robots.txt", http.StatusFound)
		case "/":
			http.SetCookie(w, &http.Cookie{Name: "srv", Value: "fromserver", Path: "/"})
			fmt.Fprintf(w, `<a href="/a?x=1">a</a> <a href="%s/b">b</a> <a href="/redir">r</a>`, s.other.srv.URL)
		case "/redir":
			http.Redirect(w, r, s.other.srv.URL+"/landing", http.StatusFound)
		default:
			fmt.Fprint(w, "<p>seed</p>")
		}
	})
	s.cookies = filepath.Join(t.TempDir(), "cookies.txt")
	writeFile(t, s.cookies, "# Netscape HTTP Cookie File\n"+
		"127.0.0.1\tFALSE\t/\tFALSE\t0\tlogin\t"+testCookieValue+"\n"+
		"127.0.0.2\tFALSE\t/\tFALSE\t0\tlogin\t"+testCookieValue+"\n")
	return s
}

// credArgs crawls the site with a token and the cookies file.
func (s *credSite) credArgs(db string, extra ...string) []string {
	args := append([]string{"--header", "Authorization: " + testToken, "--cookies", s.cookies}, extra...)
	return crawlArgs(db, append(args, s.seed.srv.URL+"/")...)
}

// hasUserCookie reports whether a Cookie header holds the file's cookie.
func hasUserCookie(header string) bool { return strings.Contains(header, "login="+testCookieValue) }

// warcRecord is one record of a decompressed archive: its WARC header
// block and its content.
type warcRecord struct{ head, block string }

func (r warcRecord) field(name string) string {
	for line := range strings.SplitSeq(r.head, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// readWARCDir is every WARC file of dir decompressed and joined, and its
// records.
func readWARCDir(t *testing.T, dir string) (string, []warcRecord) {
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
		zr, err := gzip.NewReader(f) // every member, one after another
		if err == nil {
			_, err = io.Copy(&all, zr)
		}
		f.Close()
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
	}
	var recs []warcRecord
	for raw := range strings.SplitSeq(all.String(), "WARC/1.1\r\n") {
		if head, block, ok := strings.Cut(raw, "\r\n\r\n"); ok {
			recs = append(recs, warcRecord{head, block})
		}
	}
	return all.String(), recs
}

// requestRecords are the request records of recs.
func requestRecords(recs []warcRecord) []warcRecord {
	var out []warcRecord
	for _, r := range recs {
		if r.field("WARC-Type") == "request" {
			out = append(out, r)
		}
	}
	return out
}

var requestLine = regexp.MustCompile(`^GET (\S+) HTTP/1\.1\r\n`)

// The case: a crawl through an HTTP proxy that wants a password,
// with a token and a cookies file, archived. The site gets the token and
// the cookie; the archive holds neither, nor the proxy's credentials, and
// its request lines are origin-form, as the site would have seen them
// without a proxy. The warcinfo record says secrets were masked. With
// --warc-secrets keep the token and the cookie are in the archive, and
// the proxy's credentials still are not.
func TestWARCThroughProxyKeepsNoCredentials(t *testing.T) {
	site := startCredSite(t)
	proxy := fetchtest.NewHTTPProxy(t, fetchtest.ProxyOptions{User: proxyUser, Password: proxyPassword})
	proxyURL := "http://" + proxyUser + ":" + proxyPassword + "@" + proxy.Addr
	proxyBasic := base64.StdEncoding.EncodeToString([]byte(proxyUser + ":" + proxyPassword))
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "warc")
			extra := []string{"--proxy", proxyURL, "--warc", dir}
			if keep {
				extra = append(extra, "--warc-secrets", "keep")
			}
			before := len(proxy.Forwarded())
			mustRun(t, cli.ExitOK, site.credArgs(tempDB(t), extra...)...)
			if n := len(proxy.Forwarded()) - before; n < 4 {
				t.Fatalf("the proxy forwarded %d requests, want every one", n)
			}
			sent := false
			for _, r := range site.seed.requests() {
				sent = sent || r.authorization == testToken && hasUserCookie(r.cookie)
			}
			if !sent {
				t.Fatalf("the seed host never got the token and the cookie: %+v", site.seed.requests())
			}
			if r := runCLI(t, t.Context(), "warc-check", dir); r.code != cli.ExitOK {
				t.Fatalf("warc-check: %s", r) // digests and lengths are of what is stored
			}
			all, recs := readWARCDir(t, dir)
			never := []string{proxyBasic, proxyPassword, "Proxy-Authorization", "Proxy-Connection", "GET http://"}
			if !keep {
				never = append(never, "TOPSECRET", testCookieValue, "srv=fromserver\r\n")
			}
			for _, s := range never {
				if strings.Contains(all, s) {
					t.Errorf("the archive holds %q", s)
				}
			}
			reqs := requestRecords(recs)
			if len(reqs) < 4 {
				t.Fatalf("%d request records, want one per request", len(reqs))
			}
			for _, r := range reqs {
				m := requestLine.FindStringSubmatch(r.block)
				if m == nil || !strings.HasPrefix(m[1], "/") {
					t.Errorf("request record of %s: request line not in origin-form:\n%s", r.field("WARC-Target-URI"), r.block)
				}
			}
			auth, cookie := "Authorization: "+warc.SecretMarker+"\r\n", "Cookie: "+warc.SecretMarker+"\r\n"
			info := "breakwater-secrets: masked\r\n"
			if keep {
				auth, cookie, info = "Authorization: "+testToken+"\r\n", "login="+testCookieValue, "breakwater-secrets: kept\r\n"
			}
			for _, want := range []string{auth, cookie} {
				if !strings.Contains(all, want) {
					t.Errorf("the archive does not hold %q", want)
				}
			}
			if !strings.Contains(strings.ToLower(all), info) {
				t.Errorf("the warcinfo record does not say %q", info)
			}
			if !strings.Contains(all, "Set-Cookie: srv=fromserver") {
				t.Error("the response's Set-Cookie is not kept as the server sent it")
			}
		})
	}
}

// Credentials go to the seed's host only: with --scope any the other host
// gets neither the token nor the file's cookie (though the file names it),
// not for a page linked, not for the target of the seed host's redirect,
// not on the robots.txt redirect hop. With --header-hosts all the other
// host gets them for its pages, and still not on the robots.txt hop.
func TestCredentialsGoOnlyToSeedHosts(t *testing.T) {
	for _, all := range []bool{false, true} {
		t.Run(fmt.Sprintf("all=%v", all), func(t *testing.T) {
			site := startCredSite(t)
			extra := []string{"--scope", "any"}
			if all {
				extra = append(extra, "--header-hosts", "all")
			}
			mustRun(t, cli.ExitOK, site.credArgs(tempDB(t), extra...)...)
			checkCredentials(t, site, all)
		})
	}
}

// checkCredentials asserts who got the credentials in a crawl of site:
// the seed host on every request; the other host on its pages with
// toOther, and never on the robots.txt hop.
func checkCredentials(t *testing.T, site *credSite, toOther bool) {
	t.Helper()
	for _, r := range site.seed.requests() {
		if r.authorization != testToken || !hasUserCookie(r.cookie) {
			t.Errorf("seed host %s: Authorization %q Cookie %q, want the token and the file's cookie", r.path, r.authorization, r.cookie)
		}
	}
	asked := map[string]bool{}
	for _, r := range site.other.requests() {
		asked[r.path] = true
		want := toOther && r.path != "/seed-robots.txt"
		if got := r.authorization == testToken; got != want || r.authorization != "" && !got {
			t.Errorf("other host %s: Authorization %q, want the token: %v", r.path, r.authorization, want)
		}
		if got := hasUserCookie(r.cookie); got != want {
			t.Errorf("other host %s: Cookie %q, want the file's cookie: %v", r.path, r.cookie, want)
		}
	}
	for _, p := range []string{"/b", "/landing", "/seed-robots.txt"} {
		if !asked[p] {
			t.Errorf("the other host was not asked for %s: %v", p, site.other.paths())
		}
	}
}

// --warc-secrets and --header-hosts are stored: a resume without them
// keeps them, and a later run that changes them logs it.
func TestSecretSettingsPersist(t *testing.T) {
	site := startCredSite(t)
	db := tempDB(t)
	dir := filepath.Join(t.TempDir(), "warc")
	// The seed's page only: its links wait for the resume.
	mustRun(t, cli.ExitWorkLeft, site.credArgs(db, "--scope", "any", "--warc", dir, "--warc-secrets", "keep",
		"--header-hosts", "all", "--max-pages", "1", "--workers", "1")...)
	if n := len(site.other.paths()); n != 1 {
		t.Fatalf("before the resume the other host was asked %v, want its robots.txt hop alone", site.other.paths())
	}
	mustRun(t, cli.ExitOK, "crawl", "--db", db, "--log-format", "text", "--log-level", "warn")
	checkCredentials(t, site, true)
	_, recs := readWARCDir(t, dir)
	kept := 0
	for _, r := range requestRecords(recs) {
		if strings.HasPrefix(r.field("WARC-Target-URI"), site.other.srv.URL+"/b") {
			kept++
			if !strings.Contains(r.block, "Authorization: "+testToken+"\r\n") {
				t.Errorf("the resume's request record of /b does not keep the token:\n%s", r.block)
			}
		}
	}
	if kept != 1 {
		t.Errorf("%d request records of the other host's /b, want 1", kept)
	}

	st := mustRun(t, cli.ExitOK, "status", "--db", db, "--json")
	var status struct {
		Settings map[string]json.RawMessage `json:"settings"`
	}
	if err := json.Unmarshal([]byte(st.stdout), &status); err != nil {
		t.Fatalf("status --json: %v\n%s", err, st.stdout)
	}
	if got := string(status.Settings["warc-secrets"]); got != `"keep"` {
		t.Errorf("status settings warc-secrets = %s, want the stored \"keep\"", got)
	}
	if got := string(status.Settings["header-hosts"]); got != `"all"` {
		t.Errorf("status settings header-hosts = %s, want the stored \"all\"", got)
	}
	r := mustRun(t, cli.ExitOK, "crawl", "--db", db, "--warc-secrets", "mask", "--header-hosts", "seeds",
		"--log-format", "text", "--log-level", "info")
	for _, want := range []string{`setting=warc-secrets old="\"keep\"" new="\"mask\""`, `setting=header-hosts old="\"all\"" new="\"seeds\""`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the run does not log %s:\n%s", want, r.stderr)
		}
	}
}
