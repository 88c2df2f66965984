package demosite

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// virtualClient sends requests through v's SOCKS5 front, as a crawler
// given --proxy socks5h://... does.
func virtualClient(t *testing.T, v *VirtualHosts) *http.Client {
	t.Helper()
	u, err := url.Parse(v.Proxy())
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{Proxy: http.ProxyURL(u)}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func TestVirtualHostsServeEachHostOnItsOwnConnection(t *testing.T) {
	v, err := StartVirtual(3, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if host, _, _ := net.SplitHostPort(strings.TrimPrefix(v.Proxy(), "socks5h://")); !net.ParseIP(host).IsLoopback() {
		t.Fatalf("front listens on %s, want loopback", v.Proxy())
	}
	c := virtualClient(t, v)
	get := func(u string) (int, string) {
		t.Helper()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://vhost-2.test/"); code != 200 || !strings.Contains(body, `href="/p/1"`) || !strings.Contains(body, "vhost-2.test") {
		t.Fatalf("root of vhost-2: %d %q", code, body)
	}
	if code, body := get("http://vhost-0.test/p/1"); code != 200 || !strings.Contains(body, `href="/"`) {
		t.Fatalf("page 1 of vhost-0: %d %q", code, body)
	}
	for _, u := range []string{"http://vhost-0.test/p/2", "http://vhost-0.test/p/01", "http://vhost-1.test/robots.txt"} {
		if code, _ := get(u); code != 404 {
			t.Errorf("GET %s: %d, want 404", u, code)
		}
	}
	if got := v.PageRequests(); got != 4 {
		t.Errorf("PageRequests = %d, want 4", got)
	}
	if got := v.RobotsRequests(); got != 1 {
		t.Errorf("RobotsRequests = %d, want 1", got)
	}
	if got, want := len(v.URLs()), 6; got != want {
		t.Errorf("%d URLs, want %d", got, want)
	}
}

// A target that is not one of the hosts is refused at CONNECT, as a port
// nothing listens on: no HTTP is spoken.
func TestVirtualHostsRefuseOtherTargets(t *testing.T) {
	v, err := StartVirtual(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	c := virtualClient(t, v)
	for _, u := range []string{"http://vhost-2.test/", "http://vhost-01.test/", "http://example.test/", "http://vhost-0.test:8080/"} {
		req, _ := http.NewRequestWithContext(context.Background(), "GET", u, nil)
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("GET %s: status %d, want the connection refused", u, resp.StatusCode)
		}
	}
	if got := v.Refused(); got != 4 {
		t.Errorf("Refused = %d, want 4", got)
	}
	if v.PageRequests() != 0 {
		t.Errorf("%d page requests reached the server", v.PageRequests())
	}
}

func TestVirtualHostIndex(t *testing.T) {
	for _, i := range []int{0, 7, 99999} {
		if got, ok := virtualHostIndex(VirtualHostName(i)); !ok || got != i {
			t.Errorf("index of %q = %d, %v", VirtualHostName(i), got, ok)
		}
	}
	for _, name := range []string{"vhost-.test", "vhost--1.test", "vhost-1.example", "host-1.test", "vhost-1x.test"} {
		if _, ok := virtualHostIndex(name); ok {
			t.Errorf("%q taken for a virtual host", name)
		}
	}
}
