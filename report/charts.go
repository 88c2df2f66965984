package report

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"breakwater/store"
)

// histogram counts into fixed buckets, by index.
type histogram struct {
	labels []string
	counts []int
}

func newHistogram(labels []string) histogram {
	return histogram{labels: labels, counts: make([]int, len(labels))}
}

func (h *histogram) add(i int) { h.counts[i]++ }

func (h *histogram) buckets() []Bucket {
	out := make([]Bucket, len(h.labels))
	for i, l := range h.labels {
		out[i] = Bucket{Label: l, Count: h.counts[i]}
	}
	return out
}

// trimmed is the buckets up to the last one counting anything.
func (h *histogram) trimmed() []Bucket {
	out := h.buckets()
	n := len(out)
	for n > 1 && out[n-1].Count == 0 {
		n--
	}
	return out[:n]
}

var statusLabels = []string{"2xx", "3xx", "4xx", "5xx", "none"}

// statusBucket is the index of status's class; "none" holds results
// without an answer and statuses outside 2xx-5xx.
func statusBucket(status int) int {
	if status >= 200 && status < 600 {
		return status/100 - 2
	}
	return 4
}

// timeBounds are the response time buckets' upper bounds, in ms.
var timeBounds = []int64{100, 250, 500, 1000, 2000, 5000, 10000}

var timeLabels = []string{"<100ms", "100-250ms", "250-500ms", "0.5-1s", "1-2s", "2-5s", "5-10s", "≥10s"}

func timeBucket(ms int64) int {
	i, _ := slices.BinarySearch(timeBounds, ms+1)
	return i
}

// maxDepthBucket is the last depth bucket: it holds every depth from it on.
const maxDepthBucket = 30

func depthLabels() []string {
	out := make([]string, maxDepthBucket+1)
	for i := range maxDepthBucket {
		out[i] = fmt.Sprint(i)
	}
	out[maxDepthBucket] = fmt.Sprintf("%d+", maxDepthBucket)
	return out
}

// breakers reads the hosts and breaker transitions: the summary's
// troubled hosts and the timeline.
func (b *builder) breakers(src Source) error {
	ts, err := src.Transitions("", time.Time{})
	if err != nil {
		return fmt.Errorf("read transitions: %w", err)
	}
	rows, err := src.Hosts("")
	if err != nil {
		return fmt.Errorf("read hosts: %w", err)
	}
	trouble := map[string]*HostTrouble{}
	get := func(host string) *HostTrouble {
		if trouble[host] == nil {
			trouble[host] = &HostTrouble{Host: host, State: "closed"}
		}
		return trouble[host]
	}
	for _, t := range ts {
		b.seenAt(t.At)
		if t.To == "open" {
			get(t.Host).Opened++
		}
	}
	for host, n := range b.givenUp {
		get(host).GivenUp = n
	}
	for _, r := range rows {
		if r.Hold != "" {
			get(r.Host)
		}
		if h := trouble[r.Host]; h != nil {
			h.State, h.Hold, h.HoldReason = r.State, r.Hold, cmp.Or(r.HoldReason, r.PauseReason)
		}
	}
	list := make([]HostTrouble, 0, len(trouble))
	for _, h := range trouble {
		list = append(list, *h)
	}
	slices.SortFunc(list, func(a, c HostTrouble) int {
		return cmp.Or(cmp.Compare(c.Opened, a.Opened), cmp.Compare(c.GivenUp, a.GivenUp), cmp.Compare(a.Host, c.Host))
	})
	s := &b.rep.Summary
	s.TroubledTotal = len(list)
	s.Troubled = list[:min(len(list), b.caps.Hosts)]
	b.rep.Charts.Timeline = b.timeline(ts, list)
	return nil
}

// timeline draws the spans of the most opened hosts (ts is oldest first).
func (b *builder) timeline(ts []store.Transition, troubled []HostTrouble) Timeline {
	tl := Timeline{Start: b.first, End: b.last, Hosts: []HostTimeline{}}
	if b.rep.Running && b.opt.Now.After(tl.End) {
		tl.End = b.opt.Now.UTC()
	}
	index := map[string]int{}
	for _, h := range troubled {
		if h.Opened == 0 || len(index) == b.caps.Hosts {
			continue
		}
		index[h.Host] = len(tl.Hosts)
		tl.Hosts = append(tl.Hosts, HostTimeline{Host: h.Host, Opens: h.Opened, Spans: []Span{}})
	}
	for _, t := range ts {
		i, ok := index[t.Host]
		if !ok {
			continue
		}
		h := &tl.Hosts[i]
		if n := len(h.Spans); n > 0 && h.Spans[n-1].To.IsZero() {
			h.Spans[n-1].To = t.At
		}
		if t.To != "closed" {
			h.Spans = append(h.Spans, Span{From: t.At, State: t.To})
		}
	}
	for i := range tl.Hosts {
		if n := len(tl.Hosts[i].Spans); n > 0 && tl.Hosts[i].Spans[n-1].To.IsZero() {
			tl.Hosts[i].Spans[n-1].To = tl.End
		}
	}
	return tl
}
