package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// CeilingResult is the raw fetch loop's figure: how fast this machine can
// fetch the site's pages at all, with no parsing and no storage.
type CeilingResult struct {
	Site        Size          `json:"site"`
	Pages       int           `json:"pages"`  // URLs fetched (the site's URL set, each once)
	Errors      int           `json:"errors"` // transport errors and non-200 answers
	Wall        time.Duration `json:"wall_ns"`
	PagesPerSec float64       `json:"pages_per_sec"` // the median pass
	Passes      int           `json:"passes"`
	MinPerSec   float64       `json:"min_per_sec"`
	MaxPerSec   float64       `json:"max_per_sec"`
	PassRates   []float64     `json:"pass_rates"` // each pass's pages/s, in run order
}

// ceilingPasses is how many times the URL set is fetched; the median pass
// is the figure. One pass takes well under a second, too short to trust.
const ceilingPasses = 3

// ceiling fetches the URL set ceilingPasses times and keeps the median pass.
func ceiling(ctx context.Context, cfg *Config, urls []string) (*CeilingResult, error) {
	var passes []*CeilingResult
	var rates []float64
	for range ceilingPasses {
		p, err := fetchAll(ctx, cfg, urls)
		if err != nil {
			return nil, err
		}
		passes = append(passes, p)
		rates = append(rates, p.PagesPerSec)
	}
	slices.SortFunc(passes, func(a, b *CeilingResult) int { return cmp.Compare(a.PagesPerSec, b.PagesPerSec) })
	res := passes[len(passes)/2]
	res.Passes, res.MinPerSec, res.MaxPerSec = len(passes), passes[0].PagesPerSec, passes[len(passes)-1].PagesPerSec
	res.PassRates = rates
	for _, p := range passes {
		if p != res {
			res.Errors += p.Errors
		}
	}
	return res, nil
}

// fetchAll GETs every URL once with workers goroutines over one keep-alive
// transport capped at perHost connections per host, reading each body to
// the end so its connection is reused.
func fetchAll(ctx context.Context, cfg *Config, urls []string) (*CeilingResult, error) {
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        0, // no overall cap: the ceiling should not redial
		MaxIdleConnsPerHost: cfg.HostConcurrency,
		MaxConnsPerHost:     cfg.HostConcurrency,
		IdleConnTimeout:     30 * time.Second,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	start := cfg.now()
	for range cfg.Workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(urls) {
					return
				}
				if !get(ctx, client, urls[i]) {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	wall := cfg.since(start)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ceiling: %w", err)
	}
	return &CeilingResult{Pages: len(urls), Errors: int(failed.Load()), Wall: wall,
		PagesPerSec: float64(len(urls)) / wall.Seconds()}, nil
}

// get fetches one URL to the end of its body and reports a 200.
func get(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err == nil && resp.StatusCode == http.StatusOK
}
