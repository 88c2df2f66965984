package verify

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"breakwater/breaker"
	"breakwater/store"
)

// checks names each invariant that needs a part of the view some store
// does not keep, with the parts it needs (any one of them will do).
var checks = []struct {
	name  string
	needs Parts
}{
	{"every URL waiting or done is in the seen set, and every URL seen is waiting or done", HostSeen | CrawlSeen},
	{"each URL queued again names an existing result of its own, and each result flagged for a refresh is replaced by one URL", ResultKeys},
	{"each host's tallies by status and error class equal its results", HostTallies},
	{"the crawl's counters equal its records, and conserve its URLs", CrawlCounts},
	{"the crawl's tallies by status and error class equal its results", CrawlTallies},
}

// Run checks the crawl src presents, adding what it finds to rep: see the
// invariants in checkHost and finish. Its error is for a store that
// could not be read.
func Run(rep *Report, src Source, opts Options) error {
	c, err := src.Crawl()
	if err != nil {
		return err
	}
	v := &checker{rep: rep, opts: opts, crawl: c}
	if c.Parts&CrawlSeen != 0 {
		v.marked = make([]uint64, (len(c.Seen)+63)/64)
		rep.Seen = int64(len(c.Seen))
	}
	if opts.Archive != nil {
		v.done = map[string]bool{}
		v.robotsHops = robotsHops(opts.Archive, opts.ArchiveRedirects)
		v.placedHere = map[string]int{}
	}
	if err := src.Hosts(func(h *Host) error { v.checkHost(h); return nil }); err != nil {
		return err
	}
	v.finish()
	return nil
}

type checker struct {
	rep   *Report
	opts  Options
	crawl *Crawl

	marked     []uint64 // a bit per fingerprint of crawl.Seen: found waiting or done
	computed   store.Counts
	tallies    store.Tallies
	requeued   int64           // URLs waiting to replace their result
	done       map[string]bool // URLs with a result, for the archive check
	robotsHops map[string]int  // records of each URL that are hops of a robots.txt redirect
	placedHere map[string]int  // with Options.Placed: records found where the store placed them, by URL
}

func (v *checker) has(p Parts) bool { return v.crawl.Parts&p != 0 }

// seenIndex returns the position of h in the crawl's seen set, or -1.
func (v *checker) seenIndex(h store.Hash) int {
	i, ok := slices.BinarySearch(v.crawl.Seen, v.crawl.Fingerprint(h))
	if !ok {
		return -1
	}
	return i
}

// checkHost checks one host: every URL waiting or done is in the seen set,
// in one place only, and not done unless it waits to replace its result;
// every URL seen is waiting or done (none lost); the URLs queued again
// replace a result of their own; the host's stored counters and tallies
// equal what its records hold; its breaker is well formed, its
// transitions run forward in time and generation, its cases are well
// formed and a host is held by a case exactly when it has an open one.
func (v *checker) checkHost(h *Host) {
	rep := v.rep
	inSeen := func(hash store.Hash) bool { return true }
	var hostSeen map[store.Hash]bool
	switch {
	case v.has(HostSeen):
		hostSeen = make(map[store.Hash]bool, len(h.Seen))
		for _, s := range h.Seen {
			hostSeen[s] = true
		}
		inSeen = func(hash store.Hash) bool { return hostSeen[hash] }
		rep.Seen += int64(len(hostSeen))
	case v.has(CrawlSeen):
		inSeen = func(hash store.Hash) bool { return v.seenIndex(hash) >= 0 }
	}

	var has store.HostCounts
	waiting := make(map[store.Hash]Waiting, len(h.Waiting))
	for _, w := range h.Waiting {
		it := w.Item
		switch w.Place {
		case Queued:
			has.Queued++
		case Deferred:
			has.Deferred++
		case Staged:
			rep.Staged++
		}
		if !inSeen(it.Hash) {
			rep.Addf("%s URL %s (hash %x) is not in the seen set", w.Place, it.URL, it.Hash)
		}
		if prev, dup := waiting[it.Hash]; dup {
			rep.Addf("%s URL %s (hash %x) is also %s%s", w.Place, it.URL, it.Hash, prev.Place, as(prev.Item.URL, it.URL))
			continue
		}
		waiting[it.Hash] = w
	}

	var tallies store.Tallies
	requeued := v.requeued // this host's share is counted from here
	results := make(map[uint64]*Done, len(h.Results))
	byHash := make(map[store.Hash]*Done, len(h.Results))
	for i := range h.Results {
		d := &h.Results[i]
		r := &d.Result
		name := v.resultName(d)
		if r.Host == "" || r.URL == "" {
			rep.Addf("%s: no URL or host (%q, %q)", name, r.URL, r.Host)
		}
		if !inSeen(d.Hash) {
			rep.Addf("done URL %s (hash %x, %s) is not in the seen set", r.URL, d.Hash, name)
		}
		if prev, dup := byHash[d.Hash]; dup {
			rep.Addf("URL hash %x has two results (%s and %s)", d.Hash, v.resultName(prev), name)
		} else {
			byHash[d.Hash] = d
		}
		if v.has(ResultKeys) {
			results[d.Key] = d
			if w, ok := waiting[d.Hash]; ok && w.Item.Replaces != d.Key {
				rep.Addf("%s URL %s (hash %x) is also done (%s%s)", w.Place, w.Item.URL, d.Hash, name, as(r.URL, w.Item.URL))
			}
		} else if _, ok := waiting[d.Hash]; ok {
			v.requeued++ // filed by hash: it waits to replace this result
		}
		tallies.AddStatus(r.Status, 1)
		v.tallies.AddStatus(r.Status, 1)
		if r.Failed() {
			tallies.AddFailed(r.ErrorClass, 1)
			v.tallies.AddFailed(r.ErrorClass, 1)
			has.Failed++
		} else {
			has.Fetched++
		}
		if v.done != nil {
			v.done[r.URL] = true
			v.checkArchived(name, d)
		}
	}
	if v.has(ResultKeys) {
		v.checkReplacing(waiting, results)
	}
	requeued = v.requeued - requeued

	// None lost, and no URL in two hosts' records.
	if v.has(HostSeen) {
		for _, s := range slices.SortedFunc(maps.Keys(hostSeen), compareHash) {
			if _, ok := waiting[s]; !ok && byHash[s] == nil {
				rep.Addf("the URL with hash %x of host %s is in the seen set but neither queued, deferred, staged nor done: it is lost", s, h.Name)
			}
		}
	}
	if v.has(CrawlSeen) {
		mark := func(hash store.Hash, u string) {
			i := v.seenIndex(hash)
			if i < 0 {
				return // said above
			}
			if v.marked[i/64]&(1<<(i%64)) != 0 {
				rep.Addf("URL %s (hash %x) of host %s is also another host's: two hosts' records hold one URL", u, hash, h.Name)
			}
			v.marked[i/64] |= 1 << (i % 64)
		}
		for hash, w := range waiting {
			mark(hash, w.Item.URL)
		}
		for hash, d := range byHash {
			if _, ok := waiting[hash]; !ok {
				mark(hash, d.Result.URL)
			}
		}
	}

	v.checkHostCounts(h, has, tallies, requeued)
	v.computed.Queued += has.Queued
	v.computed.Deferred += has.Deferred
	v.computed.Fetched += has.Fetched
	v.computed.Failed += has.Failed
	rep.Queued += has.Queued
	rep.Deferred += has.Deferred
	rep.Pages += has.Fetched
	rep.Failed += has.Failed

	v.checkBreaker(h)
}

func (v *checker) resultName(d *Done) string {
	if v.has(ResultKeys) {
		return fmt.Sprintf("result %d", d.Key)
	}
	return "the result of " + d.Result.URL
}

// as names the URL other under which a hash was found elsewhere, if it is
// not u: two URLs of one hash are a damaged record (or a collision).
func as(other, u string) string {
	if other == u {
		return ""
	}
	return ", as " + other
}

// checkReplacing checks the URLs queued again over their earlier result
// (refreshes, retries of failures): that result exists and is the same
// URL's, a staged URL's is flagged for a refresh, and a result flagged for
// a refresh is replaced by exactly one of them.
func (v *checker) checkReplacing(waiting map[store.Hash]Waiting, results map[uint64]*Done) {
	replacing := map[uint64]int{}
	for _, h := range slices.SortedFunc(maps.Keys(waiting), compareHash) {
		w := waiting[h]
		key := w.Item.Replaces
		if key == 0 {
			continue
		}
		replacing[key]++
		d := results[key]
		switch {
		case d == nil:
			v.rep.Addf("%s URL %s replaces result %d, which does not exist", w.Place, w.Item.URL, key)
		case d.Hash != h:
			v.rep.Addf("%s URL %s replaces result %d, which is of another URL (hash %x)", w.Place, w.Item.URL, key, d.Hash)
		case w.Place == Staged && !d.Refreshing:
			v.rep.Addf("staged URL %s replaces result %d, which is not flagged for a refresh", w.Item.URL, key)
		case w.Place != Staged:
			v.requeued++
		}
	}
	for _, key := range slices.Sorted(maps.Keys(results)) {
		if d := results[key]; d.Refreshing && replacing[key] != 1 {
			v.rep.Addf("result %d of %s is flagged for a refresh and replaced by %d waiting URLs, want 1", key, d.Result.URL, replacing[key])
		}
	}
}

// checkHostCounts checks the host's stored counters and tallies against
// its records.
func (v *checker) checkHostCounts(h *Host, has store.HostCounts, tallies store.Tallies, requeued int64) {
	rep := v.rep
	switch {
	case h.Counts != nil:
		rep.Hosts++
		if *h.Counts != has {
			rep.Addf("the stored counts of host %s are %+v, its records %+v", h.Name, *h.Counts, has)
		}
	case !h.CountsUnreadable && !has.Zero():
		rep.Addf("host %s has no stored counts, its records %+v", h.Name, has)
	}
	if v.has(HostSeen) && h.Counts != nil {
		if n := int64(len(h.Seen)); h.SeenCount != n {
			rep.Addf("the stored count seen of host %s is %d, its seen set holds %d", h.Name, h.SeenCount, n)
		}
		c := *h.Counts
		v.conserved("the stored counts of host "+h.Name, store.Counts{Seen: h.SeenCount, Queued: c.Queued,
			Deferred: c.Deferred, Fetched: c.Fetched, Failed: c.Failed}, requeued)
	}
	if v.has(HostTallies) {
		if !maps.Equal(h.Tallies.Status, tallies.Status) {
			rep.Addf("the stored tallies of host %s by status %v differ from its results' %v", h.Name, h.Tallies.Status, tallies.Status)
		}
		if !maps.Equal(h.Tallies.Failed, tallies.Failed) {
			rep.Addf("the stored tallies of host %s by error class %v differ from its results' %v", h.Name, h.Tallies.Failed, tallies.Failed)
		}
	}
}

// conserved checks that counters account for every URL seen once: the
// URLs waiting to replace their result are counted twice.
func (v *checker) conserved(what string, c store.Counts, requeued int64) {
	if got := c.Fetched + c.Failed + c.Queued + c.Deferred - requeued; got != c.Seen {
		v.rep.Addf("%s break conservation: seen %d != fetched %d + failed %d + queued %d + deferred %d - %d queued again over their result",
			what, c.Seen, c.Fetched, c.Failed, c.Queued, c.Deferred, requeued)
	}
}

var (
	stateNames = []string{"closed", "open", "half-open"}
	holdNames  = []string{"", "paused", "case", "case+paused"}
)

// checkBreaker checks the host's breaker, transitions and cases.
func (v *checker) checkBreaker(h *Host) {
	rep := v.rep
	if b := h.Breaker; b != nil {
		rep.Breakers++
		for _, p := range breakerProblems(*b) {
			rep.Addf("breaker of %s: %s", h.Name, p)
		}
	}
	rep.Transitions += len(h.Transitions)
	var last *Transition
	for i := range h.Transitions {
		t := &h.Transitions[i]
		if t.Host != h.Name || t.At.IsZero() || !slices.Contains(stateNames, t.From) || !slices.Contains(stateNames, t.To) ||
			!slices.Contains(holdNames, t.Hold) {
			rep.Addf("transition %d is malformed: host %q at %s, %q -> %q, hold %q", t.Seq, t.Host, t.At, t.From, t.To, t.Hold)
			continue
		}
		if p := last; p != nil {
			if t.At.Before(p.At) {
				rep.Addf("transition %d of %s at %s is before transition %d at %s: the host's log goes back in time",
					t.Seq, h.Name, t.At.Format(time.RFC3339Nano), p.Seq, p.At.Format(time.RFC3339Nano))
			}
			// Every transition moves the generation on. A store that
			// forgets a closed breaker counts a later run's afresh.
			if t.Generation != 0 && t.Generation <= p.Generation && !v.forgotten(p) {
				rep.Addf("transition %d of %s has generation %d, after generation %d in transition %d: the host's log is out of order",
					t.Seq, h.Name, t.Generation, p.Generation, p.Seq)
			}
		}
		last = t
	}
	if b := h.Breaker; b != nil && last != nil && last.Generation > b.Generation && !v.forgotten(last) {
		rep.Addf("breaker of %s has generation %d, behind its last transition's %d (transition %d)", h.Name, b.Generation, last.Generation, last.Seq)
	}

	rep.Cases += len(h.Cases)
	open := ""
	for _, c := range h.Cases {
		switch {
		case c.Host != h.Name || c.URL == "" || c.At.IsZero():
			rep.Addf("case %d is malformed: host %q, URL %q, at %s", c.Seq, c.Host, c.URL, c.At)
		case !c.Resolved.IsZero() && c.Resolved.Before(c.At):
			rep.Addf("case %d of %s was resolved at %s, before it was raised at %s", c.Seq, h.Name, c.Resolved, c.At)
		case c.Resolved.IsZero() && open == "":
			open = c.URL
		}
	}
	// A stored breaker is held by a case exactly when its host has an
	// open one. (A kill between the commit of a case and that of its
	// breaker's transition leaves a case and no breaker stored yet: the
	// next run holds the host again when it is refused again.)
	switch b := h.Breaker; {
	case b == nil:
	case caseHeld(*b) && open == "":
		rep.Addf("breaker of %s is held by a case, and the host has no open case to resolve", h.Name)
	case !caseHeld(*b) && open != "":
		rep.Addf("host %s has an open case (%s), and its breaker is not held by it", h.Name, open)
	}
}

// caseHeld says b is held by a case, or by a pause stored before holds
// were independent, which kept the case's reason in HoldReason.
func caseHeld(b breaker.Breaker) bool {
	return b.Hold.Has(breaker.Case) || legacyPause(b)
}

// legacyPause says b is a pause stored before holds were independent: it
// kept its reason in HoldReason, and Registry.Load moves it.
func legacyPause(b breaker.Breaker) bool { return b.Hold == breaker.Paused && b.PauseReason == "" }

// forgotten says the breaker was closed, and forgotten, after t.
func (v *checker) forgotten(t *Transition) bool {
	return v.crawl.ForgetsClosedBreakers && t.To == "closed"
}

// breakerProblems lists what is wrong with a stored breaker: what no
// sequence of transitions (breaker/doc.go) can leave behind.
func breakerProblems(b breaker.Breaker) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if b.State > breaker.HalfOpen {
		bad("state %d is none of closed, open, half-open", b.State)
	}
	if b.Hold&^(breaker.Paused|breaker.Case) != 0 {
		bad("hold %d has unknown flags", b.Hold)
	}
	if b.Hold != breaker.NoHold && b.State != breaker.Open {
		bad("held (%s) but %s: a held breaker is open", b.Hold, b.State)
	}
	if b.Failures < 0 || b.ProbeSuccesses < 0 || b.Level < 0 || b.Rest < 0 {
		bad("negative counter (failures %d, probe successes %d, level %d, rest %s)", b.Failures, b.ProbeSuccesses, b.Level, b.Rest)
	}
	switch b.State {
	case breaker.Closed:
		if !b.DownSince.IsZero() || !b.OpenedAt.IsZero() {
			bad("closed with a down time (down since %s, opened at %s)", b.DownSince, b.OpenedAt)
		}
		if b.ProbeSuccesses != 0 {
			bad("closed with %d probe successes", b.ProbeSuccesses)
		}
	case breaker.Open, breaker.HalfOpen:
		if b.DownSince.IsZero() {
			bad("%s without a down-since time", b.State)
		}
		if b.OpenedAt.IsZero() && b.Hold == breaker.NoHold {
			bad("%s without an opened-at time", b.State)
		}
		if b.Failures != 0 {
			bad("%s with %d failures counted: only a closed breaker counts them", b.State, b.Failures)
		}
	}
	if b.State == breaker.Open && b.ProbeSuccesses != 0 {
		bad("open with %d probe successes", b.ProbeSuccesses)
	}
	if b.HoldReason != "" && !b.Hold.Has(breaker.Case) && !legacyPause(b) {
		bad("a case's reason %q without a case hold", b.HoldReason)
	}
	if b.PauseReason != "" && !b.Hold.Has(breaker.Paused) {
		bad("a pause's reason %q without a pause", b.PauseReason)
	}
	return out
}

// finish checks what only the whole crawl shows: its stored counters and
// tallies against the sums of its records, a URL seen that no host holds,
// the archive's URLs that are not done, and names the checks the store
// could not be put to.
func (v *checker) finish() {
	rep, c := v.rep, v.crawl
	if v.has(CrawlCounts) {
		want := v.computed
		want.Seen = int64(len(c.Seen))
		for _, f := range []struct {
			name        string
			stored, has int64
			records     string
		}{
			{"seen", c.Counts.Seen, want.Seen, "the seen set holds"},
			{"queued", c.Counts.Queued, want.Queued, "the queue holds"},
			{"deferred", c.Counts.Deferred, want.Deferred, "the deferred URLs are"},
			{"fetched", c.Counts.Fetched, want.Fetched, "the results hold pages:"},
			{"failed", c.Counts.Failed, want.Failed, "the results hold failures:"},
		} {
			if f.stored != f.has {
				rep.Addf("the stored count %s is %d, %s %d", f.name, f.stored, f.records, f.has)
			}
		}
		v.conserved("the stored counts", c.Counts, v.requeued)
	}
	if v.has(CrawlTallies) {
		if !maps.Equal(c.Tallies.Status, v.tallies.Status) {
			rep.Addf("the stored tallies by status %v differ from the results' %v", c.Tallies.Status, v.tallies.Status)
		}
		if !maps.Equal(c.Tallies.Failed, v.tallies.Failed) {
			rep.Addf("the stored tallies by error class %v differ from the results' %v", c.Tallies.Failed, v.tallies.Failed)
		}
	}
	if v.has(CrawlSeen) {
		for i, fp := range c.Seen {
			if v.marked[i/64]&(1<<(i%64)) == 0 {
				rep.Addf("the URL with fingerprint %016x is in the seen set but neither queued, deferred, staged nor done: it is lost", fp)
			}
		}
	}
	v.checkArchive()
	for _, ck := range checks {
		if c.Parts&ck.needs == 0 {
			rep.NotChecked = append(rep.NotChecked, ck.name)
		}
	}
	if v.opts.Archive != nil && !v.has(Captures) {
		rep.NotChecked = append(rep.NotChecked, "every payload's first capture is in the archive")
	}
}

func compareHash(a, b store.Hash) int {
	for i := range a {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return 0
}
