package e2e

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"breakwater/cli"
	"breakwater/demosite"
)

// concatWARCs joins an archive directory's finished files into one
// (gzip members concatenate), for a replay tool that takes one file.
func concatWARCs(t testing.TB, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no WARC files in %s (%v)", dir, err)
	}
	slices.Sort(files)
	out := filepath.Join(t.TempDir(), "crawl.warc.gz")
	w, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(w, r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReplayHarness proves the replay harness can pass and can fail
// before the crawler fetches requisites: the live requisite site passes
// the page checks in chromium; a WARC of a crawl given every requisite as
// a seed replays whole through ReplayWeb.page; a WARC of today's crawl of
// the pages alone replays with its images broken and unstyled.
func TestReplayHarness(t *testing.T) {
	pkg := replayWebPageDir(t)
	browser := startBrowser(t)
	site := startRequisiteSite(t)
	root := site.Root()

	t.Run("live site", func(t *testing.T) {
		rep, err := loadPage(t, browser, root, root)
		if err != nil {
			t.Fatal(err)
		}
		assertWholePage(t, rep, "srcset", "picture", "other", "frame-image")
		if len(rep.CrossOrigin) != 1 {
			t.Errorf("live page: want the other host's frame alone out of reach, got %q", rep.CrossOrigin)
		}
	})

	// Both crawls run before the site closes; the replays after, so that
	// nothing a replay shows can come from the live site.
	everyDir := filepath.Join(t.TempDir(), "every")
	seeds := append(site.RequisitePages(), site.RequisiteURLs()...)
	mustRun(t, cli.ExitOK, crawlArgs(tempDB(t), append([]string{"--warc", everyDir, "--max-depth", "0", "--page-requisites=false"}, seeds...)...)...)
	pagesDir := filepath.Join(t.TempDir(), "pages")
	mustRun(t, cli.ExitOK, crawlArgs(tempDB(t), "--warc", pagesDir, "--page-requisites=false", root)...)
	if err := site.Close(); err != nil {
		t.Fatal(err)
	}
	srv := serveReplay(t, pkg)

	t.Run("every requisite archived", func(t *testing.T) {
		rep := replayPage(t, browser, srv, srv.addArchive(concatWARCs(t, everyDir)), root)
		t.Logf("replayed %s: frames %q, %d images, %d resources", rep.URL, rep.Frames, len(rep.Images), len(rep.Resources))
		assertWholePage(t, rep, everyImage...)
	})

	t.Run("pages only", func(t *testing.T) {
		warcFile := concatWARCs(t, pagesDir)
		renamed := filepath.Join(filepath.Dir(warcFile), "pages-only.warc.gz")
		if err := os.Rename(warcFile, renamed); err != nil {
			t.Fatal(err)
		}
		rep := replayPage(t, browser, srv, srv.addArchive(renamed), root)
		assertBrokenPage(t, rep)
	})
}

// everyImage are the ids of the img elements of the requisite site's
// main page and of its frames.
var everyImage = []string{"srcset", "picture", "other", "frame-image", "other-frame-image"}

// assertBrokenPage fails the test unless the replayed main page shows
// what an archive without its requisites does: no stylesheet, no script,
// and broken images, the other host's among them.
func assertBrokenPage(t testing.TB, rep pageReport) {
	t.Helper()
	if rep.HeadingColor == "" {
		t.Fatalf("%s: no h1: the page itself was not replayed", rep.URL)
	}
	if rep.HeadingColor == demosite.RequisiteHeadingColor {
		t.Errorf("%s: the stylesheet applied though it is not in the archive", rep.URL)
	}
	if rep.ScriptRan != "" {
		t.Errorf("%s: the script ran though it is not in the archive", rep.URL)
	}
	broken := map[string]bool{}
	for _, im := range rep.broken() {
		broken[im.ID] = true
	}
	for _, id := range []string{"srcset", "picture", "other"} {
		if !broken[id] {
			t.Errorf("%s: image #%s loaded though it is not in the archive: %+v", rep.URL, id, rep.Images)
		}
	}
}

// A real replay of what the crawler writes: the requisite site crawled
// from its root with --page-requisites into a WACZ replays whole in
// ReplayWeb.page, both pages of it; crawled with --page-requisites=false
// it replays with its images missing, so the check can fail.
func TestReplayCrawlWACZ(t *testing.T) {
	pkg := replayWebPageDir(t)
	browser := startBrowser(t)
	site := startRequisiteSite(t)
	root := site.Root()
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole.wacz")
	mustRun(t, cli.ExitOK, crawlArgs(tempDB(t), "--warc", filepath.Join(dir, "warc-whole"),
		"--page-requisites", "--wacz", whole, root)...)
	bare := filepath.Join(dir, "bare.wacz")
	mustRun(t, cli.ExitOK, crawlArgs(tempDB(t), "--warc", filepath.Join(dir, "warc-bare"),
		"--page-requisites=false", "--wacz", bare, root)...)
	if err := site.Close(); err != nil { // nothing replayed may come from the live site
		t.Fatal(err)
	}
	srv := serveReplay(t, pkg)

	t.Run("with requisites", func(t *testing.T) {
		archive := srv.addArchive(whole)
		assertWholePage(t, replayPage(t, browser, srv, archive, root), everyImage...)
		second := replayPage(t, browser, srv, archive, site.RequisitePages()[1])
		if second.HeadingColor != demosite.RequisiteHeadingColor || second.ScriptRan != demosite.RequisiteScriptMark {
			t.Errorf("second page: h1 color %q, script mark %q", second.HeadingColor, second.ScriptRan)
		}
		if len(second.Images) != 2 || len(second.broken()) != 0 {
			t.Errorf("second page: images %+v, want 2 loaded", second.Images)
		}
	})
	t.Run("without requisites", func(t *testing.T) {
		assertBrokenPage(t, replayPage(t, browser, srv, srv.addArchive(bare), root))
	})
}
