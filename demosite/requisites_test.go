package demosite

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"image/png"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

func startRequisites(t *testing.T) *Requisites {
	t.Helper()
	r, err := StartRequisites()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if err := r.Close(); err != nil {
			t.Errorf("second close: %v", err)
		}
	})
	return r
}

// rawGet fetches u with the given Accept-Encoding and no decoding by the
// transport, so the test sees the body and framing as sent.
func rawGet(t *testing.T, u, acceptEncoding string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", u, err)
	}
	return resp, body
}

// Every URL the site lists answers 200 with its type: images decode as
// PNGs of their own width, the font is a TrueType file, and no two
// answers are the same bytes.
func TestRequisitesServeEveryListedURL(t *testing.T) {
	r := startRequisites(t)
	if r.MainHost() == r.OtherHost() {
		t.Fatalf("both hosts are %s", r.MainHost())
	}
	reqs := r.RequisiteURLs()
	if len(reqs) != 21 || !slices.IsSorted(reqs) {
		t.Fatalf("want 21 sorted requisites (15 images, 2 stylesheets, a script, a font, 2 frames), got %d: %q", len(reqs), reqs)
	}
	seen := map[string]string{} // body -> URL
	for _, u := range slices.Concat(r.RequisitePages(), reqs, r.OffScopePages()) {
		resp, body := rawGet(t, u, "")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d", u, resp.StatusCode)
			continue
		}
		if prev, dup := seen[string(body)]; dup {
			t.Errorf("%s answers the same bytes as %s", u, prev)
		}
		seen[string(body)] = u
		ct := resp.Header.Get("Content-Type")
		switch {
		case strings.HasSuffix(u, ".png"):
			img, err := png.Decode(bytes.NewReader(body))
			if ct != "image/png" || err != nil || img.Bounds().Dx() == 0 {
				t.Errorf("%s: %s, decode error %v", u, ct, err)
			}
		case strings.HasSuffix(u, ".ttf"):
			if ct != "font/ttf" || len(body) < 12 || binary.BigEndian.Uint32(body) != 0x00010000 ||
				binary.BigEndian.Uint16(body[4:]) != 10 {
				t.Errorf("%s: %s, not a TrueType file of 10 tables: % x", u, ct, body[:min(len(body), 12)])
			}
		case strings.HasSuffix(u, ".css"):
			if !strings.HasPrefix(ct, "text/css") {
				t.Errorf("%s: %s", u, ct)
			}
		case strings.HasSuffix(u, ".js"):
			if !strings.HasPrefix(ct, "text/javascript") {
				t.Errorf("%s: %s", u, ct)
			}
		default:
			if !strings.HasPrefix(ct, "text/html") {
				t.Errorf("%s: %s", u, ct)
			}
		}
	}
	other := 0
	for _, u := range reqs {
		if strings.HasPrefix(u, "http://"+r.OtherHost()+"/") {
			other++
		}
	}
	if other != 3 {
		t.Errorf("want 3 requisites on the other host (an image, a frame and its image), got %d", other)
	}
}

// The main stylesheet is sent chunked and imports the second; the
// script is gzip-encoded exactly when the client accepts gzip.
func TestRequisitesFraming(t *testing.T) {
	r := startRequisites(t)
	resp, body := rawGet(t, r.Root()+"css/main.css", "")
	if !slices.Equal(resp.TransferEncoding, []string{"chunked"}) || resp.ContentLength != -1 {
		t.Errorf("main.css: transfer encoding %q, length %d; want chunked", resp.TransferEncoding, resp.ContentLength)
	}
	if !bytes.HasPrefix(body, []byte(`@import "imported.css";`)) || !bytes.Contains(body, []byte(RequisiteHeadingColor)) {
		t.Errorf("main.css: %s", body)
	}
	tests := []struct {
		accept string
		gzip   bool
	}{
		{"gzip", true},
		{"deflate, gzip;q=0.5", true},
		{"gzip;q=0", false},
		{"identity", false},
		{"", false},
	}
	for _, tt := range tests {
		resp, body := rawGet(t, r.Root()+"js/app.js", tt.accept)
		if got := resp.Header.Get("Content-Encoding") == "gzip"; got != tt.gzip {
			t.Errorf("Accept-Encoding %q: gzip %v, want %v", tt.accept, got, tt.gzip)
			continue
		}
		if tt.gzip {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatalf("gzip: %v", err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatalf("gunzip: %v", err)
			}
		}
		if !strings.Contains(string(body), `dataset.scriptRan = "`+RequisiteScriptMark+`"`) {
			t.Errorf("Accept-Encoding %q: script %q", tt.accept, body)
		}
		if resp.Header.Get("Vary") != "Accept-Encoding" {
			t.Errorf("Accept-Encoding %q: Vary %q", tt.accept, resp.Header.Get("Vary"))
		}
	}
}

// Every request is counted by its absolute URL on its own host; paths
// neither host serves, robots.txt among them, answer 404.
func TestRequisitesCountRequests(t *testing.T) {
	r := startRequisites(t)
	other := "http://" + r.OtherHost()
	for _, u := range []string{r.Root(), r.Root(), other + "/img/other.png", other + "/robots.txt",
		r.Root() + "img/other.png", r.Root() + "robots.txt"} {
		resp, _ := rawGet(t, u, "")
		want := http.StatusOK
		if strings.HasSuffix(u, "robots.txt") || u == r.Root()+"img/other.png" {
			want = http.StatusNotFound
		}
		if resp.StatusCode != want {
			t.Errorf("%s: status %d, want %d", u, resp.StatusCode, want)
		}
	}
	want := map[string]int{r.Root(): 2, other + "/img/other.png": 1, other + "/robots.txt": 1,
		r.Root() + "img/other.png": 1, r.Root() + "robots.txt": 1}
	got := r.Requests()
	if len(got) != len(want) {
		t.Errorf("requests %v, want %v", got, want)
	}
	for u, n := range want {
		if got[u] != n {
			t.Errorf("%s asked for %d times, counted %d", u, n, got[u])
		}
	}
}
