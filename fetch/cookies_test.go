package fetch

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func loadTestCookies(t *testing.T) *cookiejar.Jar {
	t.Helper()
	jar, err := LoadCookiesFile(filepath.Join("testdata", "cookies.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return jar
}

func cookieNames(cs []*http.Cookie) []string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	return names
}

// The jar built from testdata/cookies.txt offers each cookie to the hosts
// and paths it was set for, the secure one over https only, the expired
// one never.
func TestLoadCookiesMatchesHostPathAndScheme(t *testing.T) {
	jar := loadTestCookies(t)
	for _, tt := range []struct {
		url  string
		want string
	}{
		{"http://www.example.com/", "all_subdomains host_only"},
		{"https://www.example.com/", "all_subdomains host_only secure_http_only"},
		{"http://example.com/", "all_subdomains"},
		{"http://example.com/shop", "all_subdomains shop_path"},
		{"http://example.com/shop/cart", "all_subdomains shop_path"},
		{"http://example.com/shopping", "all_subdomains"},
		{"http://a.b.example.com/", "all_subdomains"},
		{"http://sub.www.example.com/", "all_subdomains"},
		{"http://other.example.org/", "elsewhere"},
		{"http://example.org/", ""},
		{"http://notexample.com/", ""},
	} {
		u, _ := url.Parse(tt.url)
		if got := strings.Join(cookieNames(jar.Cookies(u)), " "); got != tt.want {
			t.Errorf("cookies for %s = %q, want %q", tt.url, got, tt.want)
		}
	}
}

// LoadCookies leaves out what has expired at the time it is given, not
// only at the wall clock's.
func TestLoadCookiesSkipsExpiredAtNow(t *testing.T) {
	const file = "example.com\tFALSE\t/\tFALSE\t4102444800\tlate\t1\nexample.com\tFALSE\t/\tFALSE\t0\tsession\t2\n"
	u, _ := url.Parse("http://example.com/")
	for _, tt := range []struct {
		now  time.Time
		want string
	}{
		{time.Unix(4102444799, 0), "late session"},
		{time.Unix(4102444800, 0), "session"}, // expires at that second
	} {
		jar, err := LoadCookies(strings.NewReader(file), "jar.txt", tt.now)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(cookieNames(jar.Cookies(u)), " "); got != tt.want {
			t.Errorf("loaded at %d: %q, want %q", tt.now.Unix(), got, tt.want)
		}
	}
}

func TestLoadCookiesMalformed(t *testing.T) {
	const ok = "example.com\tFALSE\t/\tFALSE\t0\tname\tvalue\n"
	for _, tt := range []struct {
		name, line, want string
	}{
		{"six fields", "example.com\tFALSE\t/\tFALSE\t0\tname", "6 TAB-separated fields, want 7"},
		{"eight fields", "example.com\tFALSE\t/\tFALSE\t0\tname\tv\tx", "8 TAB-separated fields, want 7"},
		{"spaces for tabs", "example.com FALSE / FALSE 0 name value", "1 TAB-separated fields, want 7"},
		{"bad subdomains flag", "example.com\tyes\t/\tFALSE\t0\tname\tvalue", `include subdomains is "yes", want TRUE or FALSE`},
		{"bad secure flag", "example.com\tFALSE\t/\t1\t0\tname\tvalue", `secure is "1", want TRUE or FALSE`},
		{"expiry not a number", "example.com\tFALSE\t/\tFALSE\tsoon\tname\tvalue", `expiry "soon" is not Unix seconds`},
		{"negative expiry", "example.com\tFALSE\t/\tFALSE\t-1\tname\tvalue", `expiry "-1" is not Unix seconds`},
		{"fractional expiry", "example.com\tFALSE\t/\tFALSE\t17.5\tname\tvalue", `expiry "17.5" is not Unix seconds`},
		{"empty name", "example.com\tFALSE\t/\tFALSE\t0\t\tvalue", "the cookie name is empty"},
		{"empty domain", ".\tTRUE\t/\tFALSE\t0\tname\tvalue", `domain "." is not a host name`},
		{"url for domain", "http://example.com/\tFALSE\t/\tFALSE\t0\tname\tvalue", `domain "http://example.com/" is not a host name`},
		{"relative path", "example.com\tFALSE\tshop\tFALSE\t0\tname\tvalue", `path "shop" does not start with /`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// The bad line is the third: after a comment and a good one.
			in := "# Netscape HTTP Cookie File\n" + ok + tt.line + "\n" + ok
			_, err := LoadCookies(strings.NewReader(in), "my cookies.txt", time.Now())
			want := "my cookies.txt line 3: " + tt.want
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error = %v, want it to start %q", err, want)
			}
		})
	}
}

func TestLoadCookiesFileNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jar.txt")
	if err := os.WriteFile(path, []byte("# ok\n\nexample.com\tFALSE\t/\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCookiesFile(path); err == nil || !strings.HasPrefix(err.Error(), path+" line 3: ") {
		t.Errorf("error = %v, want it to name %s line 3", err, path)
	}
	if _, err := LoadCookiesFile(path + ".missing"); err == nil || !strings.Contains(err.Error(), "jar.txt.missing") {
		t.Errorf("missing file: error = %v, want it to name the file", err)
	}
}

func TestLoadCookiesLongLine(t *testing.T) {
	in := "example.com\tFALSE\t/\tFALSE\t0\tbig\t" + strings.Repeat("x", maxCookieLine) + "\n"
	if _, err := LoadCookies(strings.NewReader(in), "big.txt", time.Now()); err == nil || !strings.HasPrefix(err.Error(), "big.txt: ") {
		t.Errorf("error = %v, want big.txt: token too long", err)
	}
}

// FuzzLoadCookies: any input loads or fails with a line-numbered error;
// none panics.
func FuzzLoadCookies(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join("testdata", "cookies.txt"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(seed))
	f.Add("#HttpOnly_.example.com\tTRUE\t/\tTRUE\t0\tn\tv")
	f.Add("[::1]\tFALSE\t/\tFALSE\t0\tn\tv\n::1\tTRUE\t/\tFALSE\t9223372036854775807\tn\tv")
	f.Add("\uFEFFxn--bcher-kva.example\tTRUE\t/a/b\tfalse\t1\tn\t\"q v\"\r\n")
	f.Add("localhost\tTRUE\t/\tTRUE\t0\tn;x\tv;y\n..co.uk\tTRUE\t/\tFALSE\t0\tn\tv")
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, in string) {
		jar, err := LoadCookies(strings.NewReader(in), "fuzz.txt", now)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.txt") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		u, _ := url.Parse("https://www.example.com/")
		jar.Cookies(u)
	})
}

// cookieServer answers /start with a 302 setting one cookie and anything
// else with a 200 setting another, and records the Cookie header of each
// request.
func cookieServer(t *testing.T) (url string, seen func() []string) {
	t.Helper()
	var mu sync.Mutex
	var cookies []string
	srv := newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		cookies = append(cookies, r.Header.Get("Cookie"))
		mu.Unlock()
		if r.URL.Path == "/start" {
			http.SetCookie(w, &http.Cookie{Name: "from_redirect", Value: "r", Path: "/"})
			http.Redirect(w, r, "/page", http.StatusFound)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "from_page", Value: "p", Path: "/"})
	})
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return cookies
	}
}

// With a jar, a cookie set on a 302 (which the fetcher does not follow)
// and one set on a page are both sent on later requests to the host.
func TestFetchKeepsCookiesServersSet(t *testing.T) {
	t.Parallel()
	url, seen := cookieServer(t)
	o := testOptions()
	o.Jar = NewJar()
	f := newTestFetcher(t, o)
	r := f.Get(t.Context(), url+"/start")
	if r.Err != nil || r.Status != http.StatusFound {
		t.Fatalf("GET /start: status %d, %v; want 302", r.Status, r.Err)
	}
	mustFetch(t, f, r.Location)
	mustFetch(t, f, url+"/other")
	want := []string{"", "from_redirect=r", "from_redirect=r; from_page=p"}
	if got := seen(); !slices.Equal(got, want) {
		t.Errorf("Cookie headers %q, want %q", got, want)
	}
}

// Without a jar, cookies are neither sent nor kept; a typed nil jar is
// no jar.
func TestFetchWithoutJarKeepsNoCookies(t *testing.T) {
	t.Parallel()
	for _, jar := range []http.CookieJar{nil, (*cookiejar.Jar)(nil)} {
		url, seen := cookieServer(t)
		o := testOptions()
		o.Jar = jar
		f := newTestFetcher(t, o)
		mustFetch(t, f, url+"/start")
		mustFetch(t, f, url+"/page")
		mustFetch(t, f, url+"/page")
		if got := seen(); !slices.Equal(got, []string{"", "", ""}) {
			t.Errorf("jar %#v: Cookie headers %q, want none", jar, got)
		}
	}
}

// cookieSet is a Cookie header's name=value pairs, sorted.
func cookieSet(header string) []string {
	var out []string
	for p := range strings.SplitSeq(header, ";") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// A request WithoutSecrets carries none of the cookies the user gave, and
// the cookies servers set as usual, a user's cookie a server replaced
// included; the others carry all. Both jars come from one read of the file.
func TestFetchWithoutSecretsLeavesTheUsersCookiesOut(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	srv := newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Cookie"))
		mu.Unlock()
		if r.URL.Path == "/set" {
			http.SetCookie(w, &http.Cookie{Name: "from_server", Value: "s", Path: "/"})
			http.SetCookie(w, &http.Cookie{Name: "rotated", Value: "new", Path: "/"})
		}
	})
	file := filepath.Join(t.TempDir(), "cookies.txt")
	if err := os.WriteFile(file, []byte("127.0.0.1\tFALSE\t/\tFALSE\t0\tlogin\tl1\n"+
		"127.0.0.1\tFALSE\t/\tFALSE\t0\trotated\told\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := testOptions()
	jar, given, err := LoadUserCookiesFile(file)
	if err != nil {
		t.Fatal(err)
	}
	o.Jar, o.UserCookies = jar, given
	f := newTestFetcher(t, o)
	for _, step := range []struct {
		path    string
		without bool
		want    []string
	}{
		{"/a", true, nil},
		{"/a", false, []string{"login=l1", "rotated=old"}},
		{"/set", true, nil},
		{"/a", true, []string{"from_server=s", "rotated=new"}},
		{"/a", false, []string{"from_server=s", "login=l1", "rotated=new"}},
	} {
		if r := f.Fetch(t.Context(), Request{URL: srv.URL + step.path, WithoutSecrets: step.without}); r.Err != nil {
			t.Fatal(r.Err)
		}
		mu.Lock()
		got := cookieSet(seen[len(seen)-1])
		mu.Unlock()
		if !slices.Equal(got, step.want) {
			t.Errorf("%s without secrets=%v: cookies %q, want %q", step.path, step.without, got, step.want)
		}
	}
	if _, _, err := LoadUserCookiesFile(filepath.Join(t.TempDir(), "missing.txt")); err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Errorf("a missing file: %v, want an error naming it", err)
	}
}
