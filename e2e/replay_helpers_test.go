package e2e

// A real replay of an archive: ReplayWeb.page (the replaywebpage npm
// package, which .ci/run unpacks) served from loopback with the archive,
// opened in headless Debian chromium through chromedp, and the replayed
// page's styles, images and script read from inside its frame.
//
// What ReplayWeb.page needs of the server (see docs/archives.md): the
// embedding page loads ui.js; the service worker is sw.js under the
// replay prefix, /replay/sw.js, with a JavaScript content type, its scope
// that directory (so no Service-Worker-Allowed header); the archive is
// any URL the page names in source=, answered with Range support (a WACZ
// is read in ranges). Service workers need a secure context: an
// http://127.0.0.1 origin is one.

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"breakwater/demosite"
)

// replayWebPageVersion is the version .ci/run unpacks.
const replayWebPageVersion = "2.5.3"

// npmCacheDir is where .ci/run puts the npm packages the tests use, one
// directory each: $BREAKWATER_NPM_DIR, else breakwater-npm in the user's
// cache directory.
func npmCacheDir() string {
	if d := os.Getenv("BREAKWATER_NPM_DIR"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "breakwater-npm")
}

// needOrSkip skips the test for want of a tool, or fails it under CI,
// which is meant to have installed it.
func needOrSkip(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format+"; .ci/run installs it", args...)
	}
	t.Skipf(format, args...)
}

// replayWebPageDir is the unpacked replaywebpage package: the directory
// holding its ui.js and sw.js.
func replayWebPageDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(npmCacheDir(), "replaywebpage")
	var pkg struct {
		Version string `json:"version"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err == nil {
		err = json.Unmarshal(data, &pkg)
	}
	if err != nil {
		needOrSkip(t, "replaywebpage %s is not unpacked in %s: %v", replayWebPageVersion, dir, err)
	}
	if pkg.Version != replayWebPageVersion {
		needOrSkip(t, "%s holds replaywebpage %s, want %s", dir, pkg.Version, replayWebPageVersion)
	}
	for _, f := range []string{"ui.js", "sw.js"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			needOrSkip(t, "replaywebpage in %s lacks %s", dir, f)
		}
	}
	return dir
}

// chromiumPath is the Debian package's browser.
func chromiumPath(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	needOrSkip(t, "chromium is not installed")
	return ""
}

// startBrowser starts one headless chromium for the test, with a fresh
// profile, and returns the context of its first tab; each replay opens a
// tab of its own from it. The flags keep it off the network but for
// loopback.
func startBrowser(t testing.TB) context.Context {
	t.Helper()
	exe := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Headless, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first run starts the browser: no timeout on its context, which
	// would stop the browser with it.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// replayServer serves ReplayWeb.page and archives on loopback.
type replayServer struct {
	*httptest.Server
	mu       sync.Mutex
	archives map[string]string // URL path -> file
	log      []string          // requests, for the failure message
}

// serveReplay starts a server for the package in pkgDir: "/" is an
// embedding page for ?source=...&url=..., /ui.js and /replay/sw.js the
// package's files; archives are added with addArchive.
func serveReplay(t testing.TB, pkgDir string) *replayServer {
	t.Helper()
	s := &replayServer{archives: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.serveEmbed)
	mux.HandleFunc("GET /ui.js", func(w http.ResponseWriter, r *http.Request) {
		serveScript(w, r, filepath.Join(pkgDir, "ui.js"))
	})
	// The service worker's scope is the directory it is served from, so
	// it lives under the replay prefix itself and needs no
	// Service-Worker-Allowed header.
	mux.HandleFunc("GET /replay/sw.js", func(w http.ResponseWriter, r *http.Request) {
		serveScript(w, r, filepath.Join(pkgDir, "sw.js"))
	})
	mux.HandleFunc("/archive/", s.serveArchive)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.log = append(s.log, r.Method+" "+r.RequestURI+" range="+r.Header.Get("Range"))
		s.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func serveScript(w http.ResponseWriter, r *http.Request, path string) {
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	http.ServeFile(w, r, path)
}

// addArchive serves file and returns its URL path, named after the file
// (ReplayWeb.page tells a WACZ from a WARC by the name's extension).
func (s *replayServer) addArchive(file string) string {
	p := "/archive/" + filepath.Base(file)
	s.mu.Lock()
	s.archives[p] = file
	s.mu.Unlock()
	return p
}

// serveArchive answers HEAD and ranges, as ReplayWeb.page reads a WACZ.
func (s *replayServer) serveArchive(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	file, ok := s.archives[r.URL.Path]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	f, err := os.Open(file)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, fi.Name(), fi.ModTime(), f)
}

func (s *replayServer) serveEmbed(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, `<!doctype html><html><head><meta charset="utf-8"><title>replay</title>`+
		`<script src="/ui.js"></script></head><body style="margin:0">`+
		`<replay-web-page style="height:100vh" embed="replayonly" source="%s" url="%s"></replay-web-page>`+
		`</body></html>`, html.EscapeString(q.Get("source")), html.EscapeString(q.Get("url")))
}

func (s *replayServer) requests() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.log, "\n")
}

// pageReport is what a browser sees of a requisite-site page once it has
// loaded: the styles, the script's mark, the fonts and every image of the
// page and of its frames.
type pageReport struct {
	URL             string        `json:"url"`
	Frames          []string      `json:"frames"`
	HeadingColor    string        `json:"headingColor"`
	SubheadingColor string        `json:"subheadingColor"`
	SubheadingFont  string        `json:"subheadingFont"`
	ScriptRan       string        `json:"scriptRan"`
	Fonts           []string      `json:"fonts"` // family:status of each @font-face
	Images          []imageReport `json:"images"`
	// CrossOrigin lists the frames whose documents the page cannot read
	// (a live page's frames on another host; none in a replay, where
	// every frame is on the replay's origin).
	CrossOrigin []string `json:"crossOrigin"`
	// Resources are the page's and its frames' resource timing entries:
	// what the browser fetched for them, and the status (0 where another
	// origin withholds it).
	Resources []resourceReport `json:"resources"`
}

type resourceReport struct {
	Name      string `json:"name"`
	Initiator string `json:"initiator"`
	Status    int    `json:"status"`
}

type imageReport struct {
	Doc          string `json:"doc"`
	ID           string `json:"id"`
	Src          string `json:"src"`
	NaturalWidth int    `json:"naturalWidth"`
}

// broken lists the images that did not load.
func (p pageReport) broken() []imageReport {
	var out []imageReport
	for _, im := range p.Images {
		if im.NaturalWidth == 0 {
			out = append(out, im)
		}
	}
	return out
}

// findPageJS is a predicate for chromedp.PollFunction: it looks for the
// document of the page at target, the top document or one in frames and
// shadow roots at any depth (ReplayWeb.page's element holds an iframe in
// its shadow root, whose app holds the replayed page's iframe in its own),
// and returns null until that page, its frames, their images and fonts
// have all finished loading, then a pageReport.
const findPageJS = `(target) => {
	const docs = [document];
	const walk = (root) => {
		for (const el of root.querySelectorAll("*")) {
			if (el.shadowRoot) walk(el.shadowRoot);
			if (el.localName === "iframe" || el.localName === "frame") {
				let d = null;
				try { d = el.contentDocument; } catch (e) {}
				if (d) { docs.push(d); walk(d); }
			}
		}
	};
	walk(document);
	const page = docs.find(d => d.location.href === target || d.location.href.endsWith("_/" + target));
	if (!page || page.readyState !== "complete") return null;
	const within = [page];
	const frames = (d) => {
		for (const f of d.querySelectorAll("iframe, frame")) {
			const c = f.contentDocument; // null: another origin's, which a live page may embed
			if (!c) { crossOrigin.push(f.src); continue; }
			if (c.location.href === "about:blank" || c.readyState !== "complete") { within.push(null); continue; }
			within.push(c);
			frames(c);
		}
	};
	const crossOrigin = [];
	frames(page);
	if (within.includes(null)) return null;
	const images = within.flatMap(d => [...d.images].map(i => ({doc: d.location.href, id: i.id,
		src: i.currentSrc || i.src, complete: i.complete, naturalWidth: i.naturalWidth})));
	if (images.some(i => !i.complete)) return null;
	if ([...page.fonts].some(f => f.status === "loading")) return null;
	const resources = within.flatMap(d => d.defaultView.performance.getEntriesByType("resource").map(e =>
		({name: e.name, initiator: e.initiatorType, status: e.responseStatus || 0})));
	const win = page.defaultView;
	const style = (sel, prop) => { const el = page.querySelector(sel); return el ? win.getComputedStyle(el)[prop] : ""; };
	return {url: page.location.href, frames: within.slice(1).map(d => d.location.href), crossOrigin, resources,
		headingColor: style("h1", "color"), subheadingColor: style("h2", "color"), subheadingFont: style("h2", "fontFamily"),
		scriptRan: page.documentElement.dataset.scriptRan || "",
		fonts: [...page.fonts].map(f => f.family + ":" + f.status), images};
}`

// describeJS lists every document in frames and shadow roots with the
// start of its text, for a failure message.
const describeJS = `(() => {
	const out = [];
	const walk = (root, depth) => {
		for (const el of root.querySelectorAll("*")) {
			if (el.shadowRoot) walk(el.shadowRoot, depth);
			if (el.localName === "iframe") {
				let d = null;
				try { d = el.contentDocument; } catch (e) {}
				out.push("  ".repeat(depth) + (d ? d.location.href + " [" + d.readyState + "] " +
					(d.body ? d.body.innerText.slice(0, 200) : "") : "(cross-origin) " + el.src));
				if (d) walk(d, depth + 1);
			}
		}
	};
	out.push(document.location.href + " " + (document.body ? document.body.innerText.slice(0, 300) : ""));
	walk(document, 1);
	return out.join("\n");
})()`

// loadPage opens u in a new tab of browser and waits for the page at
// target to load within it (u may be target itself, or a replay of it).
func loadPage(t testing.TB, browser context.Context, u, target string) (pageReport, error) {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()
	if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
		return pageReport{}, fmt.Errorf("open %s: %w", u, err)
	}
	raw, err := chromedp.Run(ctx, chromedp.PollFunction[json.RawMessage](findPageJS,
		chromedp.WithPollingArgs(target), chromedp.WithPollingInterval(50*time.Millisecond),
		chromedp.WithPollingTimeout(45*time.Second)))
	if err != nil {
		state, derr := chromedp.Run(context.WithoutCancel(ctx), chromedp.Evaluate[string](describeJS))
		if derr != nil {
			state = derr.Error()
		}
		return pageReport{}, fmt.Errorf("wait for %s in %s: %w\ndocuments:\n%s", target, u, err, state)
	}
	var rep pageReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		return pageReport{}, fmt.Errorf("page report %s: %w", raw, err)
	}
	return rep, nil
}

// replayPage replays target from the archive at path (a URL path s
// serves) in a new tab.
func replayPage(t testing.TB, browser context.Context, s *replayServer, archive, target string) pageReport {
	t.Helper()
	u := s.URL + "/?" + url.Values{"source": {archive}, "url": {target}}.Encode()
	rep, err := loadPage(t, browser, u, target)
	if err != nil && strings.Contains(s.requests(), "GET /replay/?") {
		// The replay frame reached the server: ReplayWeb.page's service
		// worker, installed on this first visit, did not control it yet
		// (a race of a loaded machine). A user reloads; so does the test,
		// once, with the worker now in place.
		t.Logf("replay %s: the service worker was not in place on the first visit; loading again: %v", target, err)
		rep, err = loadPage(t, browser, u, target)
	}
	if err != nil {
		t.Fatalf("replay %s from %s: %v\nreplay server requests:\n%s", target, archive, err, s.requests())
	}
	return rep
}

// assertWholePage fails the test unless the page at rep looks as the
// requisite site draws it: both stylesheets applied, the font loaded, the
// script ran, the images with the wanted ids are there, and every
// image of the page and its frames decoded.
func assertWholePage(t testing.TB, rep pageReport, wantImages ...string) {
	t.Helper()
	if rep.HeadingColor != demosite.RequisiteHeadingColor {
		t.Errorf("%s: h1 color %q, want %q (the chunked stylesheet)", rep.URL, rep.HeadingColor, demosite.RequisiteHeadingColor)
	}
	if rep.SubheadingColor != demosite.RequisiteSubheadingColor {
		t.Errorf("%s: h2 color %q, want %q (the imported stylesheet)", rep.URL, rep.SubheadingColor, demosite.RequisiteSubheadingColor)
	}
	if want := demosite.RequisiteFontFamily + ":loaded"; !containsString(rep.Fonts, want) {
		t.Errorf("%s: fonts %q, want %s", rep.URL, rep.Fonts, want)
	}
	if rep.ScriptRan != demosite.RequisiteScriptMark {
		t.Errorf("%s: the gzip-encoded script did not run (mark %q)", rep.URL, rep.ScriptRan)
	}
	ids := map[string]bool{}
	for _, im := range rep.Images {
		ids[im.ID] = true
	}
	for _, id := range wantImages {
		if !ids[id] {
			t.Errorf("%s: no image #%s among %+v", rep.URL, id, rep.Images)
		}
	}
	for _, im := range rep.broken() {
		t.Errorf("%s: image #%s (%s, in %s) did not load", rep.URL, im.ID, im.Src, im.Doc)
	}
	for _, path := range cssAndMediaRequisites {
		if !rep.loaded(path) {
			t.Errorf("%s: %s was not loaded with success; the page's resources: %+v", rep.URL, path, rep.Resources)
		}
	}
	for _, r := range rep.Resources {
		if r.Status >= 400 {
			t.Errorf("%s: %s (%s) answered %d", rep.URL, r.Name, r.Initiator, r.Status)
		}
	}
}

// cssAndMediaRequisites are the requisite-site paths a browser fetches
// for the main page that are no img element: the stylesheets'
// background images and font, the style attribute's and <style>
// element's images, the poster and the script.
var cssAndMediaRequisites = []string{"/css/main.css", "/css/imported.css", "/fonts/requisite.ttf",
	"/img/body-bg.png", "/img/heading-bg.png", "/img/inline-bg.png", "/img/style-element.png",
	"/img/poster.png", "/js/app.js"}

// loaded reports whether the page fetched a URL ending in path with a
// success (or a status another origin withheld).
func (p pageReport) loaded(path string) bool {
	for _, r := range p.Resources {
		if strings.HasSuffix(r.Name, path) && r.Status < 400 {
			return true
		}
	}
	return false
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func startRequisiteSite(t testing.TB) *demosite.Requisites {
	t.Helper()
	site, err := demosite.StartRequisites()
	if err != nil {
		t.Fatalf("start requisite site: %v", err)
	}
	t.Cleanup(func() {
		if err := site.Close(); err != nil {
			t.Errorf("close requisite site: %v", err)
		}
	})
	return site
}
