package demosite

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func getWith(t *testing.T, c *http.Client, u string, header http.Header) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, string(b)}
}

func TestConditionalRequests(t *testing.T) {
	clock := &fakeClock{t: t0.Add(500 * time.Millisecond)}
	s := startSite(t, healthySpecs(3), SiteOptions{Now: clock.Now})
	h := s.Host("h0")
	c := newClient(t, 5*time.Second)
	u := h.PageURL(1)
	first := get(t, c, u)
	etag, lastMod := first.header.Get("ETag"), first.header.Get("Last-Modified")
	if first.status != 200 || etag == "" || lastMod != t0.Format(http.TimeFormat) {
		t.Fatalf("GET = %d, ETag %q, Last-Modified %q; want 200 with validators, modified at the start", first.status, etag, lastMod)
	}
	if got := h.BodyBytes(); got != int64(len(first.body)) {
		t.Errorf("BodyBytes = %d after one page of %d bytes", got, len(first.body))
	}
	for _, tt := range []struct {
		name   string
		header http.Header
		want   int
	}{
		{"current ETag", http.Header{"If-None-Match": {etag}}, 304},
		{"ETag in a list, weak", http.Header{"If-None-Match": {`"other", W/` + etag}}, 304},
		{"other ETag", http.Header{"If-None-Match": {`"other"`}}, 200},
		{"other ETag wins over a current date", http.Header{"If-None-Match": {`"other"`}, "If-Modified-Since": {lastMod}}, 200},
		{"modified since: no", http.Header{"If-Modified-Since": {lastMod}}, 304},
		{"modified since: yes", http.Header{"If-Modified-Since": {t0.Add(-time.Second).Format(http.TimeFormat)}}, 200},
		{"unparsable date", http.Header{"If-Modified-Since": {"yesterday"}}, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := h.BodyBytes()
			r := getWith(t, c, u, tt.header)
			if r.status != tt.want {
				t.Fatalf("status %d, want %d", r.status, tt.want)
			}
			if tt.want == 304 && (r.body != "" || h.BodyBytes() != before || r.header.Get("ETag") != etag) {
				t.Errorf("304 with body %q, %d body bytes counted, ETag %q; want none, none, %q", r.body, h.BodyBytes()-before, r.header.Get("ETag"), etag)
			}
			if last := h.Requests()[h.RequestCount()-1]; last.Status != tt.want {
				t.Errorf("logged status %d, want %d", last.Status, tt.want)
			}
		})
	}

	h.Change(1, 99) // out of range is ignored
	changed := getWith(t, c, u, http.Header{"If-None-Match": {etag}})
	newMod, err := http.ParseTime(changed.header.Get("Last-Modified"))
	if changed.status != 200 || changed.header.Get("ETag") == etag || err != nil || !newMod.After(t0) ||
		!strings.Contains(changed.body, "Revision 1") || changed.body == first.body {
		t.Fatalf("after Change: %d, ETag %q, Last-Modified %q; want new content and validators", changed.status,
			changed.header.Get("ETag"), changed.header.Get("Last-Modified"))
	}
	if r := getWith(t, c, u, http.Header{"If-Modified-Since": {lastMod}}); r.status != 200 {
		t.Errorf("changed within the same second as it was modified, If-Modified-Since its old date: %d, want 200", r.status)
	}
	if r := getWith(t, c, h.PageURL(2), http.Header{"If-None-Match": {`"p2-r0"`}}); r.status != 304 {
		t.Errorf("an unchanged page answered %d, want 304", r.status)
	}
	if r := get(t, c, h.PageURL(2)); strings.Contains(r.body, "Revision") {
		t.Errorf("an unchanged page mentions a revision")
	}
}
