package demosite

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Calendar is one host serving a small site with an events calendar that
// has no end, on loopback: the trap a crawl at default settings must end
// on. Its month pages are /calendar/YYYY/MM, each linking to the month
// before and the month after, for every year from 0001 to 9999, as a
// calendar written by a program does. Beside them stand a few ordinary
// pages (CalendarPages): "/" links to them and to the month the site was
// started in (its this month), and each links back home. Anything else,
// robots.txt and sitemap.xml included, is 404. Every request is counted
// by its target (Requests).
type Calendar struct {
	*loggedServer
	start int // this month, as year*12 + month-1
}

// CalendarPages are the calendar site's ordinary pages.
var CalendarPages = []string{"/", "/about", "/events", "/events/meetup"}

// StartCalendar serves a Calendar host on a fresh loopback port until
// Close; its this month is now's.
func StartCalendar(now time.Time) (*Calendar, error) {
	c := &Calendar{start: now.Year()*12 + int(now.Month()) - 1}
	ls, err := startLogged("calendar", c.serveHTTP)
	if err != nil {
		return nil, err
	}
	c.loggedServer = ls
	return c, nil
}

// MonthPath returns the path of the month offset months after this month
// (before it, when negative).
func (c *Calendar) MonthPath(offset int) string { return monthPath(c.start + offset) }

func monthPath(m int) string { return fmt.Sprintf("/calendar/%04d/%02d", m/12, m%12+1) }

func (c *Calendar) serveHTTP(w http.ResponseWriter, r *http.Request) {
	page := func(title, body string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<html><head><title>%s</title></head><body>%s</body></html>", title, body)
	}
	switch p := r.URL.Path; p {
	case "/":
		page("Town hall", `<a href="/about">About</a> <a href="/events">Events</a> `+
			`<a href="`+c.MonthPath(0)+`">This month</a>`)
	case "/about", "/events/meetup":
		page(strings.TrimPrefix(p, "/"), `<a href="/">Home</a>`)
	case "/events":
		page("Events", `<a href="/events/meetup">The meetup</a> <a href="/">Home</a>`)
	default:
		m, ok := parseMonthPath(p)
		if !ok {
			http.NotFound(w, r)
			return
		}
		page(fmt.Sprintf("%04d-%02d", m/12, m%12+1), `<a href="/">Home</a> `+
			`<a href="`+monthPath(m-1)+`">Previous month</a> <a href="`+monthPath(m+1)+`">Next month</a>`)
	}
}

// parseMonthPath reads /calendar/YYYY/MM, years 0001 to 9999, as
// year*12 + month-1.
func parseMonthPath(p string) (int, bool) {
	rest, ok := strings.CutPrefix(p, "/calendar/")
	ys, ms, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || len(ys) != 4 || len(ms) != 2 {
		return 0, false
	}
	y, err1 := strconv.Atoi(ys)
	m, err2 := strconv.Atoi(ms)
	if err1 != nil || err2 != nil || y < 1 || m < 1 || m > 12 || strings.ContainsAny(ys+ms, "+-") {
		return 0, false
	}
	return y*12 + m - 1, true
}
