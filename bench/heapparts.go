package bench

import (
	"cmp"
	"math"
	"runtime"
	"slices"
	"strings"
)

// HeapParts is what held a child's heap when it was at its largest: the
// runtime's own counts, and the live bytes of its heap profile told apart
// by the code that allocated them.
type HeapParts struct {
	HeapInuseKB int64 `json:"heap_inuse_kb"` // spans in use: live objects and their fragmentation
	// HeapFreeKB is heap the runtime keeps mapped but holds nothing
	// (HeapIdle - HeapReleased): GC headroom not yet returned to the OS.
	HeapFreeKB  int64      `json:"heap_free_kb"`
	StackKB     int64      `json:"stack_kb"`
	RuntimeKB   int64      `json:"runtime_kb"` // the runtime's own structures (GC metadata, profiles, spans)
	Goroutines  int        `json:"goroutines"`
	ProfiledKB  int64      `json:"profiled_kb"` // live bytes the profile attributes: the sum of Parts
	Parts       []HeapPart `json:"parts"`
	HeapAllocKB int64      `json:"heap_alloc_kb"`
}

// HeapPart is the live bytes allocated by one part of the crawler.
type HeapPart struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

// heapRule names the part a stack belongs to when one of its frames'
// functions starts with prefix. The innermost frame that matches any rule
// decides, so a specific rule (the pace's limiter) wins over the code that
// called it (the host table).
type heapRule struct{ prefix, part string }

// Part names, as the report prints them.
const (
	partHostState  = "host state (crawl hostState, its table entry)"
	partPace       = "pace (rate limiter)"
	partRobots     = "robots.txt rules"
	partBudget     = "retry budget"
	partBreaker    = "breaker records"
	partScope      = "scope (seed hosts)"
	partHostQueue  = "queue entry (frontier hostQueue)"
	partQueuedURLs = "queued URLs in memory (frontier buffers)"
	partFrontier   = "frontier: other (leases, deferred, heaps)"
	partHTTPWait   = "net/http: dials waited for (getConn, idleConnWait)"
	partHTTPConns  = "net/http: connections and their buffers"
	partHTTPOther  = "net/http: other"
	partPlainConns = "fetch: plain-http connections, their buffers and pool"
	partTracker    = "fetch: connection tracking"
	partFetch      = "fetch: guard, routes, responses"
	partErrors     = "errors (fmt, net)"
	partSlog       = "log/slog"
	partBolt       = "bbolt: nodes, freelist, transactions"
	partStore      = "storage: batches, seen set, items"
	partCrawl      = "crawl: other"
	partOther      = "other"
)

var heapRules = []heapRule{
	{"breakwater/crawl.NewPace", partPace},
	{"breakwater/crawl.(*Pace)", partPace},
	{"golang.org/x/time/rate.", partPace},
	{"breakwater/robots.", partRobots},
	{"github.com/temoto/robotstxt", partRobots},
	{"breakwater/crawl.(*RetryBudget)", partBudget},
	{"breakwater/breaker.", partBreaker},
	{"breakwater/crawl.newScope", partScope},
	{"breakwater/crawl.(*hostTable)", partHostState},
	{"breakwater/crawl.(*hostState)", partHostState},
	{"breakwater/frontier.(*Frontier).host", partHostQueue},
	{"breakwater/frontier.(*hostQueue)", partQueuedURLs},
	{"breakwater/frontier.", partFrontier},
	{"net/http.(*Transport).queueForIdleConn", partHTTPWait},
	{"net/http.(*Transport).queueForDial", partHTTPWait},
	{"net/http.(*wantConnQueue)", partHTTPWait},
	{"net/http.(*Transport).getConn", partHTTPWait},
	{"net/http.(*persistConn)", partHTTPConns},
	{"net/http.(*Transport).dialConn", partHTTPConns},
	{"net/http.", partHTTPOther},
	{"breakwater/fetch.(*h1", partPlainConns},
	{"breakwater/fetch.newH1Transport", partPlainConns},
	{"breakwater/fetch.(*connTracker)", partTracker},
	{"breakwater/fetch.", partFetch},
	{"fmt.Errorf", partErrors},
	{"fmt.errorf", partErrors},
	{"net.(*OpError)", partErrors},
	{"log/slog.", partSlog},
	{"go.etcd.io/bbolt", partBolt},
	{"breakwater/storage.", partStore},
	{"breakwater/store.", partStore},
	{"breakwater/crawl.", partCrawl},
}

// partOf names the part of a stack, innermost frame first.
func partOf(funcs []string) string {
	for _, fn := range funcs {
		for _, r := range heapRules {
			if strings.HasPrefix(fn, r.prefix) {
				return r.part
			}
		}
	}
	return partOther
}

// takeHeapParts reads this process's heap profile (as of the last GC) and
// memory statistics. The profile samples one allocation in
// runtime.MemProfileRate bytes; each record is scaled back up as pprof
// does, so the parts are estimates of the live bytes.
func takeHeapParts(ms *runtime.MemStats) *HeapParts {
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, false)
	for {
		recs = make([]runtime.MemProfileRecord, n+50)
		var ok bool
		if n, ok = runtime.MemProfile(recs, false); ok {
			recs = recs[:n]
			break
		}
	}
	byPart := map[string]int64{}
	var total int64
	for i := range recs {
		live := scaledLiveBytes(&recs[i], runtime.MemProfileRate)
		if live == 0 {
			continue
		}
		byPart[partOf(stackFuncs(recs[i].Stack()))] += live
		total += live
	}
	p := &HeapParts{
		HeapInuseKB: int64(ms.HeapInuse) / 1024, HeapFreeKB: int64(ms.HeapIdle-ms.HeapReleased) / 1024,
		HeapAllocKB: int64(ms.HeapAlloc) / 1024,
		StackKB:     int64(ms.StackInuse) / 1024,
		RuntimeKB:   int64(ms.MSpanInuse+ms.MCacheInuse+ms.BuckHashSys+ms.GCSys+ms.OtherSys) / 1024,
		Goroutines:  runtime.NumGoroutine(), ProfiledKB: total / 1024,
	}
	for name, b := range byPart {
		p.Parts = append(p.Parts, HeapPart{Name: name, Bytes: b})
	}
	slices.SortFunc(p.Parts, func(a, b HeapPart) int { return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), strings.Compare(a.Name, b.Name)) })
	return p
}

// scaledLiveBytes is a record's live bytes, scaled for sampling at rate.
func scaledLiveBytes(r *runtime.MemProfileRecord, rate int) int64 {
	count, size := r.InUseObjects(), r.InUseBytes()
	if count <= 0 || size <= 0 {
		return 0
	}
	if rate <= 1 {
		return size
	}
	avg := float64(size) / float64(count)
	return int64(float64(size) / (1 - math.Exp(-avg/float64(rate))))
}

func stackFuncs(pcs []uintptr) []string {
	frames := runtime.CallersFrames(pcs)
	var out []string
	for {
		f, more := frames.Next()
		if f.Function != "" {
			out = append(out, f.Function)
		}
		if !more {
			return out
		}
	}
}
