package demosite

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Each trap answers as documented, and every request is counted by its
// target.
func TestTraps(t *testing.T) {
	tr, err := StartTraps()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tr.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) (*http.Response, []byte) {
		t.Helper()
		resp, err := client.Get(tr.URL(path))
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		return resp, body
	}
	tests := []struct {
		path     string
		status   int
		location string
		check    func(body []byte) bool
	}{
		{"/calendar?month=-7", 200, "", func(b []byte) bool {
			return bytes.Contains(b, []byte(`href="/calendar?month=-8"`)) && bytes.Contains(b, []byte(`href="/calendar?month=-6"`))
		}},
		{"/calendar?month=x", 404, "", nil},
		{"/loop/a", 302, "/loop/b", nil},
		{"/loop/b", 302, "/loop/a", nil},
		{"/chain/0", 302, "/chain/1", nil},
		{"/chain/29", 302, "/chain/30", nil},
		{"/chain/30", 200, "", nil},
		{"/chain/31", 404, "", nil},
		{"/garbage", 200, "", func(b []byte) bool {
			return len(b) == len(`<a href="/garbage/found">`)+GarbageSize && bytes.IndexByte(b, 0) > 0
		}},
		{"/big-attribute", 200, "", func(b []byte) bool {
			return len(b) > 4*BigAttribute && bytes.Index(b, []byte("/big-attribute/last")) > 4*BigAttribute
		}},
		{"/robots.txt", 404, "", nil},
	}
	for _, tt := range tests {
		resp, body := get(tt.path)
		if resp.StatusCode != tt.status || resp.Header.Get("Location") != tt.location {
			t.Errorf("%s: status %d location %q, want %d %q", tt.path, resp.StatusCode, resp.Header.Get("Location"), tt.status, tt.location)
		}
		if tt.check != nil && !tt.check(body) {
			t.Errorf("%s: unexpected body of %d bytes: %.80q", tt.path, len(body), body)
		}
		if tt.status == 200 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("%s: Content-Type %q, want text/html", tt.path, resp.Header.Get("Content-Type"))
		}
	}
	_, first := get("/garbage")
	_, second := get("/garbage")
	if !bytes.Equal(first, second) {
		t.Error("/garbage differs between two requests")
	}
	if n := tr.Requests()["/garbage"]; n != 3 {
		t.Errorf("Requests()[/garbage] = %d, want 3", n)
	}
	if n := tr.Requests()["/calendar?month=-7"]; n != 1 {
		t.Errorf("Requests()[/calendar?month=-7] = %d, want 1", n)
	}
}
