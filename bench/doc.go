// Package bench is Breakwater's benchmark: it starts the project's own
// multi-host test site (demosite) on loopback and measures, side by side in
// one run, the figures it sets targets for:
//
//	ceiling   a raw keep-alive fetch loop over the site's URL set: pages/s
//	crawl     crawl.Engine over the same site from its roots: distinct pages/s,
//	          its ratio to the ceiling, and every request the site saw
//	peers     GNU wget2 (-r --max-threads 32, installed with apt-get when
//	          missing and the bench may) and `breakwater crawl --workers 32`
//	          as child processes over the same site, alternating, with a
//	          ceiling pass a round: distinct pages/s, CPU per page (rusage),
//	          peak RSS, Breakwater's ratios to wget2 and to the ceiling
//	recrawl   that crawl, then again with --recrawl-after, nothing changed and
//	          a tenth of the pages changed: time and body bytes against the
//	          first crawl, and the changed pages fetched again (30 KB pages)
//	tail      healthy hosts and a 30%-flaky one at a politeness delay: the
//	          time from the last first attempt to the end of the crawl against
//	          what the flaky host's retries in it need at its pace
//	dead      the same crawl over a bigger site with one dead host, with the
//	          breaker on and off, against the site without the dead host
//	frontier  enqueue and lease+complete throughput of the bbolt frontier
//	memory    peak RSS of a crawl process with a million queued URLs, and RSS
//	          along a 100,000-page crawl, measured in a child process
//	fleet     real `breakwater crawl` processes over the crawl section's site:
//	          one on bbolt, then 1, 2 and 4 together on one Redis (--store
//	          URL, or auto for a redis-server of its own; skipped without):
//	          wall, pages/s, Redis commands per page, each process's pages
//	soak      (opt-in) a 100,000-page crawl of 1,000 hosts plus unhealthy ones,
//	          with --warc, in a child process: pages/s, peak RSS along it, its
//	          goroutines and descriptors after Run against before, and the
//	          dead host's requests against the breaker's bound
//
// Every figure is measured, never estimated, unless the report says so (a
// run capped by time gives lower bounds, labelled as such). Figures are
// data: Report.Sections turns each section's results into Figure values
// (name, unit, value, its passes, target, one-line meaning) beside the
// section's method and settings, and one renderer prints them, as a table
// (WriteTable) or as JSON (WriteJSON). A missed target is reported, not
// hidden; a missed check (a result that is wrong, not slow) is FAILED.
// Given a previous BENCHMARKS.md (ParseBaseline), Compare holds every
// figure with a better side against the same-named figure there, and the
// table names each one more than 10% worse.
//
// Memory is measured in a separate process so that the site, the parent's
// own allocations and the other sections do not count: Config.Child builds
// the command that re-executes the binary (the hidden "internal-bench-child"
// command of breakwater, or a test binary), and Child is that process's entry
// point. The parent reads the child's /proc/PID/status.
//
// Concurrency: Run runs sections one after another; each section owns its
// site, its temporary files and its goroutines, and stops them before the
// next starts. Wall-clock time is read only at the edges of each measured
// span, through Config.Now.
package bench
