package verify

import "fmt"

// DefaultMaxProblems is how many problems a Report keeps by default.
const DefaultMaxProblems = 50

// Options tune Run.
type Options struct {
	// Archive, if not nil, maps every URL the crawl's WARC files hold a
	// response or revisit record of to the number of such records: every
	// page done must be among them, and every URL among them done.
	Archive map[string]int
	// ArchiveRedirects maps each URL of a 3xx response or revisit record
	// in the archive to where each such record redirects (warc.Report's
	// Redirects). A robots.txt fetch follows redirects, and archives each
	// hop: through these, verify counts the hops of a robots.txt redirect
	// as robots.txt fetches, not as pages without a result.
	ArchiveRedirects map[string][]string
	// ArchiveRepeats allows a URL in more than one record: the crawl
	// refreshes pages (--recrawl-after), and each refresh archives its
	// answer. Without it only robots.txt, fetched again by every run, and
	// a page answered 304 (a refresh, so fetched before) may repeat.
	ArchiveRepeats bool
	// Placed, if set, checks the archive by where the store says each
	// done page's records are (Done.Placement, "FILE OFFSET"), for a store
	// that keeps its archive state before its results (a fleet's): it
	// says whether FILE is among the files read (checked) and, if it is,
	// what is wrong with the records at OFFSET (problem). Such a store may
	// leave records no result names, of pages fetched again after a kill
	// or a lost lease: with Placed those are counted (Report.ArchiveExtra),
	// not problems, and so are the pages placed in files not read
	// (Report.ArchivedElsewhere).
	Placed func(url, placement string) (checked bool, problem error)
	// MaxProblems caps the problems kept; the rest are only counted.
	// Zero means DefaultMaxProblems.
	MaxProblems int
}

// Report is what a verification found.
type Report struct {
	// Problems name each thing wrong, one a line, up to the cap; Omitted
	// counts those found beyond.
	Problems []string
	Omitted  int
	// NotChecked names the checks the store could not be put to, because
	// it keeps no record of what they check.
	NotChecked []string
	// What the store holds, as read.
	Seen, Queued, Deferred, Staged int64
	Pages, Failed                  int64
	Hosts, Breakers, Transitions   int
	Cases                          int
	// With Options.Placed: the pages found where the store placed them,
	// those placed in files that were not read, and the response or
	// revisit records of the files read that no result names.
	ArchivePlaced, ArchivedElsewhere, ArchiveExtra int64
	// PagesDamaged says a walk of the file's pages found them damaged:
	// the problems name what, and no record was read.
	PagesDamaged bool

	max int
}

// NewReport returns an empty report that keeps up to maxProblems
// problems (DefaultMaxProblems if maxProblems is not positive).
func NewReport(maxProblems int) *Report {
	if maxProblems <= 0 {
		maxProblems = DefaultMaxProblems
	}
	return &Report{max: maxProblems}
}

// Addf adds a problem, or counts it once the report holds its cap.
func (r *Report) Addf(format string, args ...any) {
	if r.max <= 0 {
		r.max = DefaultMaxProblems
	}
	if len(r.Problems) >= r.max {
		r.Omitted++
		return
	}
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// OK reports whether nothing wrong was found.
func (r *Report) OK() bool { return len(r.Problems) == 0 && r.Omitted == 0 }
