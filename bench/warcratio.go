package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"breakwater/demosite"
)

// WARCRatioPageBytes is the size of the second site's pages: the median
// HTML page on the web, where compressing and copying a capture costs ten
// times what it does on the bench site's few-KB pages.
const WARCRatioPageBytes = 30_000

// warcRatioRuns is how many pairs (without, then with --warc) each site
// gets: one pair says little on a shared machine.
const warcRatioRuns = 3

// WARCRatio is what --warc costs the crawl on one site: Runs pairs of
// crawls, each without then with --warc, interleaved on the same site, and
// the ratio of their rates (wall) and of their CPU per page (the process's
// rusage, which includes the in-process site serving both).
type WARCRatio struct {
	Site      Size      `json:"site"`
	PageBytes int       `json:"page_bytes"`     // 0: the bench site's own pages
	Gzip      bool      `json:"gzip,omitempty"` // the site gzips its pages, as most do
	Plain     []float64 `json:"plain_pages_per_sec"`
	WARC      []float64 `json:"warc_pages_per_sec"`
	// Ratios are WARC[i]/Plain[i]; CPURatios plain CPU per page over
	// --warc CPU per page, pair by pair.
	Ratios    []float64 `json:"ratios"`
	CPURatios []float64 `json:"cpu_ratios"`
}

// Median is the middle of the wall ratios (the verdict's figure).
func (w *WARCRatio) Median() float64 { return median(w.Ratios) }

// CPUMedian is the middle of the CPU ratios.
func (w *WARCRatio) CPUMedian() float64 { return median(w.CPURatios) }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	for i := range s { // a few values: insertion sort
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}

// warcRatios measures the archive's cost on the bench site (already
// serving), on a site of the same shape with 30 KB pages, and on that
// site gzipping its pages, as most web servers do (the archive keeps the
// gzip and stores it without compressing it again).
func (r *runner) warcRatios(ctx context.Context, site *demosite.Site) ([]WARCRatio, error) {
	own, err := r.warcRatio(ctx, site, 0, false)
	if err != nil {
		return nil, err
	}
	out := []WARCRatio{own}
	for _, gz := range []bool{false, true} {
		specs := demosite.BenchSpecs(r.cfg.Site.Hosts, r.cfg.Site.Pages, false, 0)
		big, err := demosite.Start(specs, demosite.SiteOptions{Seed: 1, PageBytes: WARCRatioPageBytes, Gzip: gz})
		if err != nil {
			return nil, fmt.Errorf("start the %d-byte page site: %w", WARCRatioPageBytes, err)
		}
		large, err := r.warcRatio(ctx, big, WARCRatioPageBytes, gz)
		big.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, large)
	}
	return out, nil
}

func (r *runner) warcRatio(ctx context.Context, site *demosite.Site, pageBytes int, gz bool) (WARCRatio, error) {
	res := WARCRatio{Site: r.cfg.Site, PageBytes: pageBytes, Gzip: gz}
	for i := range warcRatioRuns {
		var rate [2]float64
		var cpu [2]time.Duration
		for k, archive := range []bool{false, true} {
			opts := r.crawlOptions(site)
			name := fmt.Sprintf("warc-ratio-%d-gzip-%v-%d-%v", pageBytes, gz, i, archive)
			if archive {
				opts.WARC.Dir = filepath.Join(r.dir, name)
			}
			before := processCPU()
			run, err := r.runEngine(ctx, name, opts, nil)
			if err != nil {
				return res, err
			}
			cpu[k] = processCPU() - before
			if run.wall > 0 && run.sum.Counts.Fetched > 0 {
				rate[k] = float64(run.sum.Counts.Fetched) / run.wall.Seconds()
				cpu[k] /= time.Duration(run.sum.Counts.Fetched)
			}
			// Kept, a pair's archive would sit in the page cache through the
			// next pairs: a 30 KB page's crawl writes 100 MB of it.
			// After the CPU is read: removing is not the crawl's cost.
			if archive {
				if err := os.RemoveAll(opts.WARC.Dir); err != nil {
					return res, fmt.Errorf("remove %s: %w", opts.WARC.Dir, err)
				}
			}
		}
		res.Plain, res.WARC = append(res.Plain, rate[0]), append(res.WARC, rate[1])
		if rate[0] > 0 && cpu[1] > 0 {
			res.Ratios = append(res.Ratios, rate[1]/rate[0])
			res.CPURatios = append(res.CPURatios, float64(cpu[0])/float64(cpu[1]))
		}
		r.cfg.logf("crawl: --warc ratio, %s, pair %d: %.0f pages/s without, %.0f with", siteName(pageBytes, gz), i+1, rate[0], rate[1])
	}
	return res, nil
}

// processCPU is this process's user and system time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// warcRatioFigures reports each site's ratios, the median judged.
func warcRatioFigures(ratios []WARCRatio) []Figure {
	var figs []Figure
	for _, w := range ratios {
		g := "with --warc, " + siteName(w.PageBytes, w.Gzip) + ": "
		figs = append(figs,
			num(g+"median ratio to the crawl without", Share, w.Median(), fmt.Sprintf("%d pairs without then with --warc, "+
				"interleaved on one site; pairs %s", len(w.Ratios), shares(w.Ratios))).want(AtLeast, TargetWARCToCrawl),
			num(g+"median CPU-per-page ratio", Share, w.CPUMedian(), "CPU per page without over with --warc "+
				"(process rusage, the in-process site included); pairs "+shares(w.CPURatios)))
	}
	return figs
}

// siteName names a ratio's site by its pages' size (0: the bench site's)
// and whether it gzips them.
func siteName(pageBytes int, gz bool) string {
	name := "the bench site"
	if pageBytes != 0 {
		name = fmt.Sprintf("%d KB pages", pageBytes/1000)
	}
	if gz {
		name += " gzipped"
	}
	return name
}

func shares(xs []float64) string {
	s := ""
	for i, x := range xs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%.2f", x)
	}
	return s
}
