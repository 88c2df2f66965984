package report

import (
	"cmp"
	"slices"
)

// walkRedirects follows the redirects from every URL no other redirect
// leads to, then from what is left (loops of redirects alone, which no
// URL outside leads into), each redirect walked once as a chain's start.
// A chain is listed when it has more than one hop, a loop always.
func (b *builder) walkRedirects() {
	targets := make(map[string]bool, len(b.redirects))
	for _, r := range b.redirects {
		targets[r.location] = true
	}
	starts := make([]string, 0, len(b.redirects))
	for u := range b.redirects {
		starts = append(starts, u)
	}
	slices.Sort(starts)
	walked := make(map[string]bool, len(b.redirects))
	for _, u := range starts {
		if !targets[u] {
			b.walk(u, walked)
		}
	}
	for _, u := range starts {
		if !walked[u] {
			b.walk(u, walked)
		}
	}
}

// walk follows the chain from start, marking every URL it passes walked.
func (b *builder) walk(start string, walked map[string]bool) {
	var c Chain
	onChain := map[string]bool{}
	cur := start
	for {
		r, ok := b.redirects[cur]
		if !ok {
			break
		}
		if onChain[cur] {
			c.Loop = true
			break
		}
		onChain[cur], walked[cur] = true, true
		c.Hops = append(c.Hops, Hop{URL: cur, Status: r.status})
		cur = r.location
	}
	c.Final = cur
	list := &b.rep.RedirectChains
	switch {
	case c.Loop:
		list = &b.rep.RedirectLoops
	case len(c.Hops) < 2:
		return
	}
	list.Total++
	if len(list.Items) < b.caps.Rows {
		list.Items = append(list.Items, c)
		if !c.Loop {
			b.lookups[c.Final] = &lookedUp{}
		}
	}
}

// finishChains fills in each chain's end from the last pass and orders
// the chains longest first.
func (b *builder) finishChains(list *Chains) {
	for i := range list.Items {
		c := &list.Items[i]
		if l := b.lookups[c.Final]; l != nil && !c.Loop {
			c.FinalStatus, c.FinalClass = l.status, l.class
		}
	}
	slices.SortStableFunc(list.Items, func(a, c Chain) int {
		return cmp.Or(cmp.Compare(len(c.Hops), len(a.Hops)), cmp.Compare(a.Hops[0].URL, c.Hops[0].URL))
	})
	if list.Items == nil {
		list.Items = []Chain{}
	}
}
