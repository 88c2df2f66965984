package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// PageSize is a site of large pages for the memory section: Pages pages of
// Bytes each, every one linking to every other.
type PageSize struct {
	Pages int   `json:"pages"`
	Bytes int64 `json:"bytes"`
	// Workers and HostConcurrency are the crawl's; the site is one host.
	Workers, HostConcurrency int
}

func (p PageSize) String() string {
	return fmt.Sprintf("%d pages of %s, %d workers, host concurrency %d", p.Pages, format(Bytes, float64(p.Bytes)), p.Workers, p.HostConcurrency)
}

// largePages serves p on a loopback port, each page written as it goes,
// never held whole: the bench process must not measure itself.
func largePages(p PageSize) (root string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("large pages: listen: %w", err)
	}
	chunk := []byte(strings.Repeat("<p>lorem ipsum dolor sit amet, consectetur adipiscing elit</p>\n", 1024))
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/p/") {
			http.NotFound(w, r) // robots.txt, sitemaps
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<html><head><title>%s</title></head><body>", r.URL.Path)
		for i := range p.Pages {
			fmt.Fprintf(w, `<a href="/p/%d">page %d</a> `, i, i)
		}
		for n := int64(0); n < p.Bytes; n += int64(len(chunk)) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		fmt.Fprint(w, "</body></html>")
	})}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String() + "/p/0", func() { srv.Close() }, nil
}

// largePageRuns crawls each of the configured large-page sites in a child
// at the crawler's default body cap: memory must not follow page size.
func (r *runner) largePageRuns(ctx context.Context, res *MemoryResult) error {
	for i, p := range r.cfg.LargePages {
		r.cfg.logf("memory: crawl of %s", p)
		root, stop, err := largePages(p)
		if err != nil {
			return err
		}
		seeds := filepath.Join(r.dir, fmt.Sprintf("large-%d-seeds.txt", i))
		if err := writeLines(seeds, []string{root}); err != nil {
			stop()
			return err
		}
		args := []string{"--db", filepath.Join(r.dir, fmt.Sprintf("large-%d.db", i)), "--seeds", seeds,
			"--workers", strconv.Itoa(p.Workers), "--host-concurrency", strconv.Itoa(p.HostConcurrency)}
		run, err := r.runChild(ctx, childRun{name: fmt.Sprintf("large-%d", i), args: args})
		stop()
		if err != nil {
			return err
		}
		res.Large = append(res.Large, LargePageRun{Size: p, Run: run})
	}
	return nil
}

// LargePageRun is one crawl of a large-page site.
type LargePageRun struct {
	Size PageSize   `json:"size"`
	Run  *MemoryRun `json:"run"`
}
