package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"breakwater/demosite"
	"breakwater/storage"
)

// soakNoFile is how many descriptors each side may need: the site a
// listener a host, and both sides the connections of the child's idle pool
// (8 a worker) and its workers, with room for files and the runtime.
func soakNoFile(hosts, workers int) (parent, child uint64) {
	conns := uint64(16*workers + 256)
	return uint64(hosts) + conns, conns
}

// soak runs the soak's crawl in a child process and reads what it left:
// the site's logs, the file, the archive.
func (r *runner) soak(ctx context.Context) error {
	cfg, sc := r.cfg, r.cfg.Soak
	res := &SoakResult{Config: sc, Workers: cfg.Workers, HostConcurrency: cfg.HostConcurrency}
	r.report.Soak = res
	specs := soakSpecs(sc)
	parentFDs, childFDs := soakNoFile(len(specs), cfg.Workers)
	var err error
	if res.NoFile, err = raiseNoFile(parentFDs); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	site, err := demosite.Start(specs, demosite.SiteOptions{Seed: 1, DeadLinksPerPage: 1})
	if err != nil {
		return fmt.Errorf("soak: start the site (%d hosts): %w", len(specs), err)
	}
	defer site.Close()
	seeds := filepath.Join(r.dir, "soak-seeds.txt")
	warcDir := filepath.Join(r.dir, "soak-warc")
	dbPath := filepath.Join(r.dir, "soak.db")
	logPath := filepath.Join(r.dir, "soak-log.jsonl")
	if err := writeLines(seeds, site.Roots()); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	if err := os.Mkdir(warcDir, 0o755); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	args := []string{"--db", dbPath, "--seeds", seeds, "--warc", warcDir, "--log", logPath,
		"--workers", strconv.Itoa(cfg.Workers), "--host-concurrency", strconv.Itoa(cfg.HostConcurrency),
		"--timeout", sc.Timeout.String(), "--breaker-threshold", strconv.Itoa(sc.Breaker.Threshold),
		"--breaker-rest", sc.Breaker.Rest.String(), "--breaker-probes", strconv.Itoa(sc.Breaker.Probes),
		"--give-up-after", sc.GiveUpAfter.String(), "--retry-base", sc.RetryBase.String(),
		"--retry-max", sc.RetryMax.String(), "--retry-budget", strconv.FormatFloat(sc.RetryBudget, 'g', -1, 64),
		"--settle", sc.Settle.String(),
		"--nofile", strconv.FormatUint(childFDs, 10)}
	healthy, unhealthy := splitHosts(site)
	cfg.logf("soak: %s healthy plus a dead, a flaky, a throttling, a recovering and a refusing host, --warc, in a child process", sc.Site)
	run, err := r.runChild(ctx, childRun{name: "soak", args: args, sample: soakSampler(healthy, sc.Site), limit: sc.Cap})
	if err != nil {
		return err
	}
	res.Run = run
	if len(run.Samples) < 3 && run.last.RSSKB > 0 {
		run.Samples = append(run.Samples, run.last)
	}
	if l := run.Child.Leaks; l != nil && l.GoroutineDump != "" {
		res.GoroutineDump = r.keep("soak-goroutines", []byte(l.GoroutineDump))
		l.GoroutineDump = "" // in the file, not in every report
	}
	res.Healthy = hostsTraffic(healthy)
	res.HealthyDone = lastRequest(healthy).Sub(run.start)
	res.Refetched = askedTwice(healthy, run.start, maxRefetched)
	if res.Logged, err = countLogged(logPath); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	// Warnings are expected (the dead host given up, the refusing host's
	// case); an error is not, and its lines are kept for whoever reads why.
	if loggedErrors(res.Logged) {
		if data, err := os.ReadFile(logPath); err == nil {
			res.LogFile = r.keep("soak-log", data)
		}
	}
	for _, h := range unhealthy {
		res.Unhealthy = append(res.Unhealthy, soakHostTraffic(h, run.start))
	}
	if err := site.Close(); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	if st, err := os.Stat(dbPath); err == nil {
		res.DBBytes = st.Size()
	}
	if err := res.inspectFile(dbPath, healthy, unhealthy, run); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	cfg.logf("soak: reading the archive back (warc.Check) and verifying the database against it")
	var archived map[string]int
	if res.WARC, archived, err = soakArchive(warcDir, healthy); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	if res.Verify, err = verifyFile(dbPath, archived); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	return nil
}

// SoakVerify is storage's Verify of the crawl's file against its archive,
// the check `breakwater verify --db --warc` runs: bbolt's own, the crawl's
// invariants, every page done archived.
type SoakVerify struct {
	OK       bool     `json:"ok"`
	Problems []string `json:"problems,omitempty"` // the first few
	Omitted  int      `json:"omitted,omitempty"`
	Seen     int64    `json:"seen"`
}

func verifyFile(path string, archived map[string]int) (SoakVerify, error) {
	db, err := storage.Open(path, &storage.Options{ReadOnly: true})
	if err != nil {
		return SoakVerify{}, err
	}
	defer db.Close()
	rep, err := db.Verify(storage.VerifyOptions{Archive: archived})
	if err != nil {
		return SoakVerify{}, fmt.Errorf("verify %s: %w", path, err)
	}
	return SoakVerify{OK: rep.OK(), Problems: rep.Problems[:min(len(rep.Problems), maxProblems)],
		Omitted: rep.Omitted + max(len(rep.Problems)-maxProblems, 0), Seen: rep.Seen}, nil
}

// splitHosts separates the healthy hosts from the others.
func splitHosts(site *demosite.Site) (healthy, unhealthy []*demosite.Host) {
	for _, h := range site.Hosts() {
		if h.Spec().Behavior == demosite.Healthy {
			healthy = append(healthy, h)
		} else {
			unhealthy = append(unhealthy, h)
		}
	}
	return healthy, unhealthy
}

// soakSampler records RSS when the healthy hosts have served 25, 50 and
// 100% of their pages (one robots.txt request a host discounted): the
// unhealthy hosts' pages come at their own pace and would blur the marks.
func soakSampler(healthy []*demosite.Host, size Size) sampler {
	return percentSampler(size.URLs(), func() int {
		n := -len(healthy)
		for _, h := range healthy {
			n += h.RequestCount()
		}
		return n
	})
}
