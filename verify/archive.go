package verify

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"breakwater/robots"
	"breakwater/store"
)

// isRobots reports whether u is a robots.txt URL: every run fetches those
// again and archives each answer as it comes.
func isRobots(u string) bool { return strings.HasSuffix(u, "/robots.txt") }

// robotsHops counts, for each URL, the records of it in the archive that
// are hops of a robots.txt redirect: a robots.txt fetch follows up to
// robots.MaxRedirects redirects, to any path or host, and archives each
// answer, so each 3xx record of a robots.txt URL, or of a hop, names the
// next hop by its Location. The archive does not tell which of a URL's
// records a redirect led to, so a URL that is both a hop and a page may
// lend the hop's excuse to one of its page's records.
func robotsHops(archive map[string]int, redirects map[string][]string) map[string]int {
	hops := map[string]int{}
	var from []string
	for u := range archive {
		if isRobots(u) {
			from = append(from, u)
		}
	}
	for range robots.MaxRedirects {
		var next []string
		for _, u := range from {
			for _, target := range redirects[u] {
				if isRobots(target) {
					continue // followed from itself
				}
				if hops[target] == 0 {
					next = append(next, target)
				}
				hops[target]++
			}
		}
		from = next
	}
	for u, n := range hops {
		hops[u] = min(n, archive[u]) // a hop refused by its host's breaker was not archived
	}
	return hops
}

// checkArchived checks one result against the archive: a page done is
// archived, once unless it may repeat; with Options.Placed, where the
// store placed it.
func (v *checker) checkArchived(name string, d *Done) {
	r := &d.Result
	if v.opts.Placed != nil {
		v.checkPlaced(name, d)
		return
	}
	n, hops := v.opts.Archive[r.URL], v.robotsHops[r.URL]
	switch {
	case !r.Failed() && r.Status != 0 && n == 0:
		v.rep.Addf("page %s (%s, status %d) is done but not in the archive", r.URL, name, r.Status)
	case n-hops > 1 && !v.opts.ArchiveRepeats && !isRobots(r.URL) && r.Status != 304:
		v.rep.Addf("%s is in %d response or revisit records%s, want 1", r.URL, n, hopsOf(hops))
	}
}

// checkPlaced checks that a page done is in the archive where the store
// placed it.
func (v *checker) checkPlaced(name string, d *Done) {
	r := &d.Result
	if r.Failed() || r.Status == 0 {
		return // no records
	}
	if d.Placement == "" {
		v.rep.Addf("page %s (%s, status %d) is done but the store names no place in the archive for it", r.URL, name, r.Status)
		return
	}
	checked, problem := v.opts.Placed(r.URL, d.Placement)
	switch {
	case !checked:
		v.rep.ArchivedElsewhere++
	case problem != nil:
		v.rep.Addf("page %s (%s, status %d) is done but not in the archive where the store placed it (%s): %v",
			r.URL, name, r.Status, d.Placement, problem)
	default:
		v.rep.ArchivePlaced++
		v.placedHere[r.URL]++
	}
}

// hopsOf says how many of a URL's records are robots.txt redirect hops.
func hopsOf(hops int) string {
	if hops == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d of them hops of a robots.txt redirect)", hops)
}

// checkArchive checks that every URL in the archive is done, or a
// robots.txt fetch, and that every payload's first capture, which its
// revisits refer to, is in the archive.
func (v *checker) checkArchive() {
	if v.opts.Archive == nil {
		return
	}
	if v.opts.Placed != nil {
		// Records no result names: pages fetched again after a kill, or
		// after a lease was lost, archived each time.
		for u, n := range v.opts.Archive {
			if extra := n - v.placedHere[u] - v.robotsHops[u]; !isRobots(u) && extra > 0 {
				v.rep.ArchiveExtra += int64(extra)
			}
		}
		return
	}
	for _, u := range slices.Sorted(maps.Keys(v.opts.Archive)) {
		if n, hops := v.opts.Archive[u], v.robotsHops[u]; !v.done[u] && !isRobots(u) && n > hops {
			v.rep.Addf("%s is in the archive (%d records%s) but has no result in the database", u, n, hopsOf(hops))
		}
	}
	if !v.has(Captures) || v.crawl.Captures == nil {
		return
	}
	err := v.crawl.Captures(func(digest string, c store.Capture) {
		if v.opts.Archive[c.URI] == 0 {
			v.rep.Addf("payload %s was first captured from %s, which is not in the archive: its revisits refer to nothing", digest, c.URI)
		}
	})
	if err != nil {
		v.rep.Addf("reading the captures stopped: %v", err)
	}
}
