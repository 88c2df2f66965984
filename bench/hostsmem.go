package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"breakwater/crawl"
	"breakwater/demosite"
)

// HostsResult is the hosts section: peak RSS of crawls whose memory must
// follow the hosts being crawled, not every host ever seen.
type HostsResult struct {
	// ManySite is crawled to the end with every URL given as a seed, so all
	// its hosts have URLs queued from the start. Its hosts are virtual
	// (demosite.VirtualHosts), reached through a SOCKS5 front.
	ManySite Size       `json:"many_site"`
	Many     *MemoryRun `json:"many,omitempty"`
	// ManyServed is the page and robots.txt requests the site answered.
	ManyServed int64 `json:"many_served"`
	// FailingSite is hosts x URLs a host, every host refusing connections
	// (a loopback address nothing listens on), crawled until each is given
	// up on after FailingGiveUp.
	FailingSite   Size          `json:"failing_site"`
	FailingGiveUp time.Duration `json:"failing_give_up_ns"`
	// FailingThreshold is its --breaker-threshold; 0 means the default.
	FailingThreshold int        `json:"failing_threshold,omitempty"`
	Failing          *MemoryRun `json:"failing,omitempty"`
	// RefusingSite is crawled as FailingSite is, with one URL a host: the
	// hosts outnumber the URLs that keep them in the queue.
	RefusingSite Size       `json:"refusing_site"`
	Refusing     *MemoryRun `json:"refusing,omitempty"`
}

// failingHost is the address of failing host i: 127.1.0.0/16 and up, no
// octet 0 or 255, port 80, where nothing listens.
func failingHost(i int) string {
	return fmt.Sprintf("127.%d.%d.%d", 1+i/62500, (i/250)%250+1, i%250+1)
}

// failingWorkers are the failing crawl's workers, one request a host.
const failingWorkers = 32

// hostsSection runs the two child crawls of the hosts section.
func (r *runner) hostsSection(ctx context.Context) error {
	cfg := r.cfg
	res := &HostsResult{ManySite: cfg.ManyHosts, FailingSite: cfg.FailingHosts, FailingGiveUp: cfg.FailingGiveUp,
		FailingThreshold: cfg.FailingThreshold, RefusingSite: cfg.RefusingHosts}
	r.report.Hosts = res
	site, err := demosite.StartVirtual(cfg.ManyHosts.Hosts, cfg.ManyHosts.Pages)
	if err != nil {
		return fmt.Errorf("hosts: %w", err)
	}
	defer site.Close()
	seeds := filepath.Join(r.dir, "many-hosts.txt")
	if err := writeLines(seeds, site.URLs()); err != nil {
		return fmt.Errorf("hosts: %w", err)
	}
	cfg.logf("hosts: crawl of %s, every URL a seed, to the end", cfg.ManyHosts)
	args := []string{"--heapparts", "--db", filepath.Join(r.dir, "many-hosts.db"), "--seeds", seeds, "--proxy", site.Proxy(),
		"--workers", strconv.Itoa(cfg.Workers), "--host-concurrency", strconv.Itoa(cfg.HostConcurrency)}
	if res.Many, err = r.runChild(ctx, childRun{name: "many-hosts", args: args, limit: cfg.HostsCap}); err != nil {
		return err
	}
	res.ManyServed = site.PageRequests() + site.RobotsRequests()

	if res.Failing, err = r.failingRun(ctx, "failing-hosts", cfg.FailingHosts); err != nil {
		return err
	}
	if cfg.RefusingHosts.Hosts == 0 {
		return nil
	}
	res.Refusing, err = r.failingRun(ctx, "refusing-hosts", cfg.RefusingHosts)
	return err
}

// failingRun crawls size hosts refusing connections until each is given up.
func (r *runner) failingRun(ctx context.Context, name string, size Size) (*MemoryRun, error) {
	cfg := r.cfg
	var urls []string
	for i := range size.Hosts {
		for p := range size.Pages {
			urls = append(urls, "http://"+failingHost(i)+"/p/"+strconv.Itoa(p))
		}
	}
	seeds := filepath.Join(r.dir, name+".txt")
	if err := writeLines(seeds, urls); err != nil {
		return nil, fmt.Errorf("hosts: %w", err)
	}
	cfg.logf("hosts: crawl of %s refusing connections, each given up after %s", size, cfg.FailingGiveUp)
	// Default politeness (--delay 1s) and breaker: a refused connection is
	// a transient failure, retried, until the host's circuit opens.
	args := []string{"--heapparts", "--db", filepath.Join(r.dir, name+".db"), "--seeds", seeds, "--workers", strconv.Itoa(failingWorkers),
		"--host-concurrency", "1", "--delay", crawl.DefaultOptions().Delay.String(), "--give-up-after", cfg.FailingGiveUp.String()}
	if cfg.FailingThreshold > 0 {
		args = append(args, "--breaker-threshold", strconv.Itoa(cfg.FailingThreshold))
	}
	return r.runChild(ctx, childRun{name: name, args: args, limit: cfg.HostsCap})
}
