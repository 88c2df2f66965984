package fetch

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func TestParseHeader(t *testing.T) {
	good := []struct {
		in, name, value string
	}{
		{"X-Crawl-Run: 42", "X-Crawl-Run", "42"},
		{"  accept-language :  de-CH, de;q=0.9  ", "Accept-Language", "de-CH, de;q=0.9"},
		{"Authorization: Bearer abc:def", "Authorization", "Bearer abc:def"}, // the first colon splits
		{"Cookie: a=1; b=2", "Cookie", "a=1; b=2"},
		{"X-Empty:", "X-Empty", ""},
		{"X-Tab:\tv", "X-Tab", "v"},
		{"User-Agent: Mozilla/5.0 (compatible)", "User-Agent", "Mozilla/5.0 (compatible)"},
	}
	for _, tt := range good {
		name, value, err := ParseHeader(tt.in)
		if err != nil || name != tt.name || value != tt.value {
			t.Errorf("ParseHeader(%q) = %q, %q, %v; want %q, %q", tt.in, name, value, err, tt.name, tt.value)
		}
	}
	bad := []struct {
		in      string
		wantErr string // the whole error is `--header "<in>": <wantErr>` unless it starts with "~"
	}{
		{"X-No-Colon value", `~--header "X-No-Colon v…(5 bytes)": want "Name: value", there is no colon`},
		{": value", "the header name is empty"},
		{"   : value", "the header name is empty"},
		{"X Bad: v", `"X Bad" is not a valid header name (an HTTP token)`},
		{"X(Bad): v", `"X(Bad)" is not a valid header name (an HTTP token)`},
		{"Ünïcode: v", `"Ünïcode" is not a valid header name (an HTTP token)`},
		{"X-Ctl: a\x00b", "the value holds a control character"},
		{"Host: x", "Host is set from the URL and cannot be overridden"},
		{"host: x", "Host is set from the URL and cannot be overridden"},
		{"Content-Length: 0", "Content-Length frames the message and is set by the transport"},
		{"Transfer-Encoding: chunked", "Transfer-Encoding frames the message and is set by the transport"},
		{"Trailer: X", "Trailer frames the message and is set by the transport"},
		{"TE: trailers", "TE is a hop-by-hop header the transport manages"},
		{"Connection: close", "Connection is a hop-by-hop header the transport manages"},
		{"Keep-Alive: 5", "Keep-Alive is a hop-by-hop header the transport manages"},
		{"Proxy-Connection: keep-alive", "Proxy-Connection is a hop-by-hop header the transport manages"},
		{"Upgrade: h2c", "Upgrade is a hop-by-hop header the transport manages"},
		{"Accept-Encoding: gzip", "Accept-Encoding is negotiated by the transport, which decodes gzip; setting it would leave bodies compressed"},
		// A secret's value is masked in the error.
		{"Proxy-Authorization: Basic dXNlcjpwYXNz", `~--header "Proxy-Authorization: Bas…(18 bytes)": Proxy-Authorization belongs in the proxy URL (http://user:pass@host:port)`},
		{"X-Api-Key: sekrit\x01", `~--header "X-Api-Key: s…(7 bytes)": the value holds a control character`},
	}
	for _, tt := range bad {
		_, _, err := ParseHeader(tt.in)
		want := fmt.Sprintf("--header %q: %s", tt.in, tt.wantErr)
		if w, ok := strings.CutPrefix(tt.wantErr, "~"); ok {
			want = w
		}
		if err == nil || err.Error() != want {
			t.Errorf("ParseHeader(%q) error = %v\nwant %s", tt.in, err, want)
		}
	}
}

func TestIsSecretHeader(t *testing.T) {
	for name, want := range map[string]bool{
		"Authorization": true, "authorization": true, "Cookie": true, "Proxy-Authorization": true,
		"X-Auth-Token": true, "X-Csrf-Token": true, "X-Client-Secret": true, "X-Api-Key": true,
		"X-APIKEY": true, "api_key": true, "X-Session-Id": true, "X-Password": true,
		"Accept-Language": false, "X-Crawl-Run": false, "Referer": false, "User-Agent": false, "From": false,
	} {
		if got := IsSecretHeader(name); got != want {
			t.Errorf("IsSecretHeader(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestMaskValue(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"Bearer abcdef123", "Bea…(16 bytes)"},
		{"Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "Bea…(39 bytes)"},
		{"abc", "…(3 bytes)"},              // too short to show anything
		{"abcd", "a…(4 bytes)"},            // a quarter
		{"abcdefgh", "ab…(8 bytes)"},       // a quarter
		{"abcdefghijkl", "abc…(12 bytes)"}, // three at most
		{"äöüßäöüßäöüß", "äöü…(24 bytes)"}, // characters, not bytes, are shown
	} {
		if got := MaskValue(tt.in); got != tt.want {
			t.Errorf("MaskValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// headerServer records the headers of each request it serves.
func headerServer(t *testing.T) (url string, seen func() []http.Header) {
	t.Helper()
	var mu sync.Mutex
	var got []http.Header
	srv := newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
	})
	return srv.URL, func() []http.Header {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

// Options.Header reaches the server on every request, after User-Agent;
// a Request's header wins over it.
func TestFetchSendsOptionsHeader(t *testing.T) {
	t.Parallel()
	url, seen := headerServer(t)
	o := testOptions()
	o.Header = http.Header{"x-crawl-run": {"42"}, "Accept-Language": {"de-CH"}, "Authorization": {"Bearer abc"}}
	f := newTestFetcher(t, o)
	for name, values := range o.Header { // New took a copy: an edit in place must not reach it
		if strings.EqualFold(name, "X-Crawl-Run") {
			values[0] = "changed after New"
		}
	}
	mustFetch(t, f, url)
	r := f.Fetch(context.Background(), Request{URL: url, Header: http.Header{"accept-language": {"fr"}}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	mustFetch(t, f, url)
	got := seen()
	for i, want := range []map[string]string{
		{"X-Crawl-Run": "42", "Accept-Language": "de-CH", "Authorization": "Bearer abc", "User-Agent": "Breakwater-test/1.0"},
		{"X-Crawl-Run": "42", "Accept-Language": "fr", "Authorization": "Bearer abc"},
		{"X-Crawl-Run": "42", "Accept-Language": "de-CH"}, // the override was for one request
	} {
		for name, value := range want {
			if g := got[i][name]; len(g) != 1 || g[0] != value {
				t.Errorf("request %d: %s = %q, want [%q]", i, name, g, value)
			}
		}
	}
}

// A header the transport owns, put in Options.Header without ParseHeader
// (a hand-edited setting), is dropped: gzip is still negotiated and
// decoded, the Host still comes from the URL.
func TestFetchDropsOwnedOptionsHeaders(t *testing.T) {
	t.Parallel()
	url, seen := headerServer(t)
	o := testOptions()
	o.Header = http.Header{"Accept-Encoding": {"br"}, "Connection": {"close"}, "Host": {"evil.example"}, "X-Kept": {"yes"}}
	mustFetch(t, newTestFetcher(t, o), url)
	h := seen()[0]
	if h.Get("Accept-Encoding") != "gzip" || h.Get("Connection") != "" || h.Get("X-Kept") != "yes" {
		t.Errorf("server saw Accept-Encoding %q Connection %q X-Kept %q; want gzip, none, yes",
			h.Get("Accept-Encoding"), h.Get("Connection"), h.Get("X-Kept"))
	}
	if got := extraHeaders(o.Header); len(got) != 1 {
		t.Errorf("extraHeaders kept %v, want X-Kept only", got)
	}
	if extraHeaders(http.Header{"Host": {"x"}}) != nil || extraHeaders(nil) != nil {
		t.Error("extraHeaders of nothing to send is not nil")
	}
}

// WithoutSecrets leaves Options.Header's secret headers out of one request
// and keeps the others.
func TestFetchWithoutSecrets(t *testing.T) {
	t.Parallel()
	url, seen := headerServer(t)
	o := testOptions()
	o.Header = http.Header{"Authorization": {"Bearer abc"}, "X-Api-Key": {"k"}, "X-Team": {"crawl"}}
	f := newTestFetcher(t, o)
	if r := f.Fetch(context.Background(), Request{URL: url, WithoutSecrets: true}); r.Err != nil {
		t.Fatal(r.Err)
	}
	got := seen()[0]
	if len(got["Authorization"]) != 0 || len(got["X-Api-Key"]) != 0 || len(got["X-Team"]) != 1 {
		t.Errorf("headers sent %v: want X-Team alone of the extra ones", got)
	}
}

// A header typed without its colon may hold a secret: the error names the
// first word and hides the rest.
func TestParseHeaderErrorHidesAValueWithoutColon(t *testing.T) {
	for _, in := range []string{"Authorization Bearer s3cr3t-t0ken", "Authorization=s3cr3t-t0ken"} {
		_, _, err := ParseHeader(in)
		if err == nil || strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "Authorization") {
			t.Errorf("ParseHeader(%q) = %v: want an error naming Authorization without the secret", in, err)
		}
	}
}
