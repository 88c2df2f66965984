package demosite

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
)

// Traps is one host serving the traps a crawler meets on the open web,
// on loopback, for the crawler's hostile-server tests. Every
// path is a pure function of the request, and every request is counted
// by its target (Requests). The paths:
//
//   - /calendar?month=N: a page linking to months N-1 and N+1, for every
//     integer N: an endless space of pages, as shallow as it is wide.
//   - /loop/a and /loop/b: each redirects (302) to the other.
//   - /chain/N: redirects to /chain/N+1 up to ChainLength, which is a page.
//   - /garbage: GarbageSize bytes of random binary, labelled text/html,
//     after one link to /garbage/found.
//   - /big-attribute: a page whose links stand before, between and after
//     attribute values of BigAttribute bytes (an inline data: image, a
//     title, an href far longer than any URL), with a title as long.
//     Its links lead to /big-attribute/before, /after and /last.
//
// Anything else, robots.txt included, is 404.
type Traps struct {
	*loggedServer
}

const (
	// ChainLength is the last hop of /chain/N: it answers 200.
	ChainLength = 30
	// GarbageSize is the length of /garbage.
	GarbageSize = 1 << 20
	// BigAttribute is the length of each of /big-attribute's huge values.
	BigAttribute = 256 << 10
)

// StartTraps serves a Traps host on a fresh loopback port until Close.
func StartTraps() (*Traps, error) {
	t := &Traps{}
	ls, err := startLogged("traps", t.serveHTTP)
	if err != nil {
		return nil, err
	}
	t.loggedServer = ls
	return t, nil
}

func (t *Traps) serveHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	html := func() { w.Header().Set("Content-Type", "text/html; charset=utf-8") }
	switch {
	case p == "/":
		html()
		io.WriteString(w, `<html><head><title>Traps</title></head><body>`+
			`<a href="/calendar?month=0">calendar</a> <a href="/loop/a">loop</a> <a href="/chain/0">chain</a> `+
			`<a href="/garbage">garbage</a> <a href="/big-attribute">big attribute</a></body></html>`)
	case p == "/calendar":
		month, err := strconv.Atoi(r.URL.Query().Get("month"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		html()
		fmt.Fprintf(w, `<html><head><title>Month %d</title></head><body>`+
			`<a href="/calendar?month=%d">previous</a> <a href="/calendar?month=%d">next</a></body></html>`,
			month, month-1, month+1)
	case p == "/loop/a":
		http.Redirect(w, r, "/loop/b", http.StatusFound)
	case p == "/loop/b":
		http.Redirect(w, r, "/loop/a", http.StatusFound)
	case strings.HasPrefix(p, "/chain/"):
		n, err := strconv.Atoi(strings.TrimPrefix(p, "/chain/"))
		switch {
		case err != nil || n < 0 || n > ChainLength:
			http.NotFound(w, r)
		case n < ChainLength:
			http.Redirect(w, r, "/chain/"+strconv.Itoa(n+1), http.StatusFound)
		default:
			html()
			io.WriteString(w, "<html><title>End of the chain</title></html>")
		}
	case p == "/garbage":
		html()
		writeGarbage(w)
	case p == "/big-attribute":
		html()
		writeBigAttribute(w)
	case p == "/garbage/found" || p == "/big-attribute/before" || p == "/big-attribute/after" || p == "/big-attribute/last":
		html()
		io.WriteString(w, "<html><title>Found</title></html>")
	default:
		http.NotFound(w, r)
	}
}

// writeGarbage writes one link, then GarbageSize random bytes: NULs,
// invalid UTF-8, stray "<" and all. The same bytes each time.
func writeGarbage(w io.Writer) {
	io.WriteString(w, `<a href="/garbage/found">`)
	rng := rand.NewChaCha8([32]byte{16})
	buf := make([]byte, 32<<10)
	for left := GarbageSize; left > 0; left -= len(buf) {
		rng.Read(buf)
		if _, err := w.Write(buf[:min(len(buf), left)]); err != nil {
			return
		}
	}
}

func writeBigAttribute(w io.Writer) {
	big := func(c string) string { return strings.Repeat(c, BigAttribute) }
	fmt.Fprintf(w, `<html><head><title>%s</title></head><body>`, big("T"))
	io.WriteString(w, `<a href="/big-attribute/before">before</a>`)
	fmt.Fprintf(w, `<img alt="inline" src="data:image/png;base64,%s">`, big("A"))
	fmt.Fprintf(w, `<a title="%s" href="/big-attribute/after">after</a>`, big("t"))
	fmt.Fprintf(w, `<a href="/%s">too long a URL</a>`, big("x"))
	io.WriteString(w, `<a href="/big-attribute/last">last</a></body></html>`)
}
