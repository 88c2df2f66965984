package demosite

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Requisites is a two-host site whose pages are made of every kind of
// page requisite, for the tests of fetching requisites and of replaying an
// archive: the main host serves two pages (RequisitePages) and what they
// need, and the other host, on another loopback address (or another port
// where the machine has only 127.0.0.1), serves an image and an embedded
// frame of the main page, and pages that are only linked (OffScopePages),
// which a crawl scoped to the main host must never fetch.
//
// The main page ("/") uses:
//   - a stylesheet sent chunked, in three flushed writes, that @imports a
//     second stylesheet (by a relative URL), with a background image; the
//     second declares an @font-face with a TrueType font and a background
//     image of its own, both by URLs relative to it;
//   - a script sent gzip-encoded when the client accepts it;
//   - an img with a srcset, a picture whose source has a srcset with
//     width descriptors, a video poster, a style attribute's url() and a
//     <style> element's url();
//   - an iframe on the main host whose document has its own image, and an
//     iframe and an image on the other host;
//   - a favicon.
//
// The second page shares the stylesheet, the script, the favicon and the
// srcset image with the first and has one image of its own, so a crawler
// that fetches each requisite once per crawl asks for each URL once.
//
// What a browser can observe once everything loaded: h1's computed color
// is RequisiteHeadingColor (main stylesheet), h2's is
// RequisiteSubheadingColor and its font family RequisiteFontFamily
// (imported stylesheet), the script has set the root element's
// data-script-ran attribute to "yes", and every img is a real PNG with a
// natural width above zero.
//
// Every request is counted by its absolute URL (Requests). Paths neither
// host serves answer 404, robots.txt included.
type Requisites struct {
	main, other *requisiteHost
	resources   map[string]resource // absolute URL -> body
	requisites  []string
	pages       []string
	offScope    []string

	mu  sync.Mutex
	log map[string]int

	closeOnce sync.Once
	closeErr  error
}

// The styles the requisite site's stylesheets set, as getComputedStyle
// reports them.
const (
	RequisiteHeadingColor    = "rgb(1, 2, 3)"
	RequisiteSubheadingColor = "rgb(4, 5, 6)"
	RequisiteFontFamily      = "Requisite"
	// RequisiteScriptMark is the value the script gives the root
	// element's data-script-ran attribute.
	RequisiteScriptMark = "yes"
)

type requisiteHost struct {
	ln   net.Listener
	srv  *http.Server
	base string
	done chan struct{}
}

// resource is one URL's answer. Chunks are written one by one, each
// flushed, so a resource of more than one chunk is sent chunked.
type resource struct {
	contentType string
	chunks      [][]byte
	gzip        bool // sent Content-Encoding: gzip when the client accepts it
	page        bool // a navigation target rather than a requisite
}

// StartRequisites serves the requisite site on two fresh loopback
// listeners until Close.
func StartRequisites() (*Requisites, error) {
	main, err := listenRequisiteHost("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	// Another address keeps the other host out of scope however the
	// crawl's scope is drawn (a domain scope takes in every port of an
	// IP); not every system routes all of 127.0.0.0/8, so fall back to a
	// port of its own.
	other, err := listenRequisiteHost("127.0.0.2:0")
	if err != nil {
		other, err = listenRequisiteHost("127.0.0.1:0")
	}
	if err != nil {
		main.ln.Close()
		return nil, err
	}
	r := &Requisites{main: main, other: other, log: map[string]int{}}
	if err := r.build(); err != nil {
		main.ln.Close()
		other.ln.Close()
		return nil, err
	}
	main.serve(r)
	other.serve(r)
	return r, nil
}

func listenRequisiteHost(addr string) (*requisiteHost, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("requisite site: listen on %s: %w", addr, err)
	}
	return &requisiteHost{ln: ln, base: "http://" + ln.Addr().String(), done: make(chan struct{})}, nil
}

func (h *requisiteHost) serve(r *Requisites) {
	handler := func(w http.ResponseWriter, req *http.Request) { r.serveHTTP(h.base, w, req) }
	h.srv = &http.Server{Handler: http.HandlerFunc(handler), ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: log.New(io.Discard, "", 0)}
	go func() {
		defer close(h.done)
		_ = h.srv.Serve(h.ln) // ErrServerClosed after Close
	}()
}

func (h *requisiteHost) close() error {
	err := h.srv.Close()
	<-h.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Root is the URL of the main page, the one seed a crawl of the site needs.
func (r *Requisites) Root() string { return r.main.base + "/" }

// MainHost and OtherHost are the hosts' host:port, as the crawler keys them.
func (r *Requisites) MainHost() string  { return strings.TrimPrefix(r.main.base, "http://") }
func (r *Requisites) OtherHost() string { return strings.TrimPrefix(r.other.base, "http://") }

// RequisitePages returns the URLs of the main host's two pages.
func (r *Requisites) RequisitePages() []string { return slices.Clone(r.pages) }

// RequisiteURLs returns the absolute URL of every requisite the pages
// use, however deep (the imported stylesheet's font, the frames'
// images), each once, sorted.
func (r *Requisites) RequisiteURLs() []string { return slices.Clone(r.requisites) }

// OffScopePages returns the other host's pages: linked by <a> from the
// main page and from the other host's frame, never needed to show a page.
func (r *Requisites) OffScopePages() []string { return slices.Clone(r.offScope) }

// Requests returns how many times each absolute URL (query included) was
// asked for, on either host.
func (r *Requisites) Requests() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.log))
	for k, v := range r.log {
		out[k] = v
	}
	return out
}

// Close stops both hosts, drops their connections and waits for them. It
// is safe to call more than once.
func (r *Requisites) Close() error {
	r.closeOnce.Do(func() { r.closeErr = errors.Join(r.main.close(), r.other.close()) })
	return r.closeErr
}

// serveHTTP answers a request to the host at base (scheme and authority).
func (r *Requisites) serveHTTP(base string, w http.ResponseWriter, req *http.Request) {
	u := base + req.RequestURI
	r.mu.Lock()
	r.log[u]++
	r.mu.Unlock()
	res, ok := r.resources[u]
	if !ok || (req.Method != http.MethodGet && req.Method != http.MethodHead) {
		http.NotFound(w, req)
		return
	}
	w.Header().Set("Content-Type", res.contentType)
	chunks := res.chunks
	if res.gzip {
		w.Header().Set("Vary", "Accept-Encoding")
		if acceptsGzip(req.Header.Get("Accept-Encoding")) {
			w.Header().Set("Content-Encoding", "gzip")
			chunks = [][]byte{gzipped(bytes.Join(chunks, nil))}
		}
	}
	if len(chunks) == 1 {
		w.Header().Set("Content-Length", fmt.Sprint(len(chunks[0])))
	}
	w.WriteHeader(http.StatusOK)
	if req.Method == http.MethodHead {
		return
	}
	flusher, _ := w.(http.Flusher)
	for _, c := range chunks {
		if _, err := w.Write(c); err != nil {
			return
		}
		if flusher != nil && len(chunks) > 1 {
			flusher.Flush()
		}
	}
}

func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") && strings.ReplaceAll(params, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// build lays out every URL of both hosts. Each image has its own size and
// colour, so no two answers are the same bytes (an archive would store
// the second as a revisit of the first).
func (r *Requisites) build() error {
	m, o := r.main.base, r.other.base
	r.resources = map[string]resource{}
	add := func(url, contentType string, chunks ...string) {
		bs := make([][]byte, len(chunks))
		for i, c := range chunks {
			bs[i] = []byte(c)
		}
		r.resources[url] = resource{contentType: contentType, chunks: bs}
	}
	pageHTML := "text/html; charset=utf-8"
	add(m+"/", pageHTML, requisiteMainPage(o))
	add(m+"/page2.html", pageHTML, requisitePage2)
	add(m+"/frame.html", pageHTML, `<!doctype html><html><head><title>Frame</title></head>`+
		`<body><img id="frame-image" src="img/frame.png" alt="frame"></body></html>`)
	add(o+"/frame.html", pageHTML, `<!doctype html><html><head><title>Other frame</title></head>`+
		`<body><img id="other-frame-image" src="/img/other-frame.png" alt="other frame">`+
		`<a href="/elsewhere.html">elsewhere</a></body></html>`)
	add(o+"/elsewhere.html", pageHTML, `<!doctype html><html><head><title>Elsewhere</title></head>`+
		`<body><a href="/elsewhere-deeper.html">deeper</a></body></html>`)
	add(o+"/elsewhere-deeper.html", pageHTML, `<!doctype html><html><head><title>Deeper</title></head><body></body></html>`)
	add(m+"/css/main.css", "text/css; charset=utf-8",
		`@import "imported.css";`+"\n",
		"h1 { color: "+RequisiteHeadingColor+"; }\n",
		"body { background-image: url(/img/body-bg.png); }\n")
	add(m+"/css/imported.css", "text/css; charset=utf-8",
		`@font-face { font-family: "`+RequisiteFontFamily+`"; src: url("../fonts/requisite.ttf") format("truetype"); }`+"\n"+
			"h2 { color: "+RequisiteSubheadingColor+"; font-family: "+RequisiteFontFamily+", monospace;"+
			" background-image: url( '../img/heading-bg.png' ); }\n")
	r.resources[m+"/js/app.js"] = resource{contentType: "text/javascript; charset=utf-8", gzip: true,
		chunks: [][]byte{[]byte(requisiteScript)}}
	r.resources[m+"/fonts/requisite.ttf"] = resource{contentType: "font/ttf", chunks: [][]byte{requisiteFont()}}
	images := []string{
		m + "/img/logo.png", m + "/img/logo-2x.png", m + "/img/picture-narrow.png", m + "/img/picture-wide.png",
		m + "/img/picture-fallback.png", m + "/img/poster.png", m + "/img/inline-bg.png", m + "/img/style-element.png",
		m + "/img/body-bg.png", m + "/img/heading-bg.png", m + "/img/favicon.png", m + "/img/frame.png",
		m + "/img/page2.png", o + "/img/other.png", o + "/img/other-frame.png",
	}
	for i, u := range images {
		b, err := requisitePNG(i)
		if err != nil {
			return fmt.Errorf("requisite site: image %s: %w", u, err)
		}
		r.resources[u] = resource{contentType: "image/png", chunks: [][]byte{b}}
	}
	r.pages = []string{m + "/", m + "/page2.html"}
	r.offScope = []string{o + "/elsewhere.html", o + "/elsewhere-deeper.html"}
	for u := range r.resources {
		if !slices.Contains(r.pages, u) && !slices.Contains(r.offScope, u) {
			r.requisites = append(r.requisites, u)
		}
	}
	slices.Sort(r.requisites)
	return nil
}

// requisitePNG is a real PNG (browsers decode it: naturalWidth > 0) of
// size and colour of its own for image i.
func requisitePNG(i int) ([]byte, error) {
	img := image.NewNRGBA(image.Rect(0, 0, 8+i, 4+i%3))
	c := color.NRGBA{R: uint8(40 + 13*i), G: uint8(200 - 11*i), B: uint8(90 + 7*i), A: 255}
	for y := range img.Rect.Dy() {
		for x := range img.Rect.Dx() {
			img.SetNRGBA(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

const requisiteScript = `document.documentElement.dataset.scriptRan = "` + RequisiteScriptMark + `";` + "\n"

func requisiteMainPage(other string) string {
	return `<!doctype html>
<html><head><title>Requisites</title>
<link rel="stylesheet" href="/css/main.css">
<link rel="icon" href="/img/favicon.png" type="image/png">
<script src="/js/app.js"></script>
<style>.boxed { background-image: url("/img/style-element.png"); width: 10px; height: 10px; }</style>
</head><body>
<h1>Requisites</h1>
<h2>Every kind of requisite</h2>
<img id="srcset" src="/img/logo.png" srcset="/img/logo.png 1x, /img/logo-2x.png 2x" alt="logo">
<picture>
<source srcset="/img/picture-narrow.png 100w, /img/picture-wide.png 200w" sizes="50px" type="image/png">
<img id="picture" src="/img/picture-fallback.png" alt="picture">
</picture>
<video id="video" poster="/img/poster.png" width="16" height="16"></video>
<div id="inline" style="background:url(/img/inline-bg.png); width: 10px; height: 10px"></div>
<div class="boxed"></div>
<iframe id="frame" src="frame.html" width="100" height="60"></iframe>
<iframe id="other-frame" src="` + other + `/frame.html" width="100" height="60"></iframe>
<img id="other" src="` + other + `/img/other.png" alt="other host">
<p><a href="page2.html">the second page</a> <a href="` + other + `/elsewhere.html">elsewhere</a></p>
</body></html>
`
}

const requisitePage2 = `<!doctype html>
<html><head><title>Requisites, page 2</title>
<link rel="stylesheet" href="/css/main.css">
<link rel="icon" href="/img/favicon.png" type="image/png">
<script src="/js/app.js"></script>
</head><body>
<h1>The second page</h1>
<img id="srcset" src="/img/logo.png" srcset="/img/logo.png 1x, /img/logo-2x.png 2x" alt="logo">
<img id="page2" src="/img/page2.png" alt="page 2">
<p><a href="/">home</a></p>
</body></html>
`
