package demosite

import (
	"io"
	"net/http"
	"regexp"
	"slices"
	"testing"
	"time"
)

// Each page of the calendar site answers as documented: month pages link
// to the month before and after across year ends, for every year from
// 0001 to 9999 and no other; the ordinary pages link home; the rest is 404.
func TestCalendar(t *testing.T) {
	c, err := StartCalendar(time.Date(2026, time.December, 2, 17, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	hrefs := regexp.MustCompile(`href="([^"]*)"`)
	get := func(path string) (int, []string) {
		t.Helper()
		resp, err := http.Get(c.URL(path))
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		var links []string
		for _, m := range hrefs.FindAllSubmatch(body, -1) {
			links = append(links, string(m[1]))
		}
		return resp.StatusCode, links
	}
	tests := []struct {
		path   string
		status int
		links  []string
	}{
		{"/", 200, []string{"/about", "/events", "/calendar/2026/12"}},
		{"/about", 200, []string{"/"}},
		{"/events", 200, []string{"/events/meetup", "/"}},
		{"/events/meetup", 200, []string{"/"}},
		{"/calendar/2026/12", 200, []string{"/", "/calendar/2026/11", "/calendar/2027/01"}},
		{"/calendar/2027/01", 200, []string{"/", "/calendar/2026/12", "/calendar/2027/02"}},
		{"/calendar/0001/01", 200, []string{"/", "/calendar/0000/12", "/calendar/0001/02"}},
		{"/calendar/9999/12", 200, []string{"/", "/calendar/9999/11", "/calendar/10000/01"}},
		{"/calendar/0000/12", 404, nil},
		{"/calendar/10000/01", 404, nil},
		{"/calendar/2026/13", 404, nil},
		{"/calendar/2026/1", 404, nil},
		{"/calendar/+026/01", 404, nil},
		{"/calendar/2026", 404, nil},
		{"/robots.txt", 404, nil},
		{"/sitemap.xml", 404, nil},
	}
	for _, tt := range tests {
		status, links := get(tt.path)
		if status != tt.status || status == 200 && !slices.Equal(links, tt.links) {
			t.Errorf("%s: status %d links %v, want %d %v", tt.path, status, links, tt.status, tt.links)
		}
	}
	for offset, want := range map[int]string{0: "/calendar/2026/12", 1: "/calendar/2027/01", -12: "/calendar/2025/12", 13: "/calendar/2028/01"} {
		if got := c.MonthPath(offset); got != want {
			t.Errorf("MonthPath(%d) = %q, want %q", offset, got, want)
		}
	}
	if n := c.Requests()["/calendar/2026/12"]; n != 1 {
		t.Errorf("Requests()[/calendar/2026/12] = %d, want 1", n)
	}
}
