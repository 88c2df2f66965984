package crawl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"breakwater/extract"
	"breakwater/frontier"
	"breakwater/store"
)

// A wider scope fetches what a narrower one kept out. The link graph keeps
// every link of every page, those the scope refused included (excluded,
// on another host, too deep), with what the record keeps of its page (its
// depth, its kind, its robots directives). The settings keep a fingerprint
// of the scope the graph was last followed under (linkScopeKey). A run
// whose scope differs reads the graph once, while the workers crawl, and
// queues the links the new scope admits that were never queued (the seen
// set says so), each as the crawl would have queued it from its page; the
// pages themselves are not fetched again. The fingerprint is stored when
// the whole graph has been read and the run has committed what it queued:
// a run cut short reads it again next time, and finds what it queued seen.
// URLs queued before and refused since, recorded out-of-scope or held back
// by a trap rule, are results: those the new scope and trap rules admit
// are queued again, replacing their results, before the run starts.

// linkScopeKey is the stored settings' key of the scope fingerprint.
const linkScopeKey = "link_scope"

// scopeFingerprint names the settings that decide which of a page's links
// the crawl queues: the scope and its seed hosts, the filters, the depth,
// requisites, the directives obeyed and the trap rules.
func (e *Engine) scopeFingerprint(seedHosts []string) string {
	o := &e.opts
	hosts := slices.Clone(seedHosts)
	slices.Sort(hosts)
	parts, _ := json.Marshal([]any{o.Scope, hosts, patterns(o.Include), patterns(o.Exclude), o.MaxDepth,
		o.PageRequisites, o.RequisiteHops, o.RobotsMeta, o.SkipRelNofollow, o.Traps})
	sum := sha256.Sum256(parts)
	return hex.EncodeToString(sum[:12])
}

// widening is a run's reading of the link graph under a new scope.
type widening struct {
	fingerprint string      // the scope's, stored once done
	pending     bool        // the graph is to be read this run
	done        atomic.Bool // read to its end, every admitted link handed to the frontier
	queued      atomic.Int64
}

// planWidening decides, from the stored settings, whether this run reads
// the graph: when the store keeps one and the scope is not the one it was
// last followed under. A crawl with no result yet has nothing to read: its
// fingerprint goes into the settings written now.
func (e *Engine) planWidening(stored map[string]json.RawMessage, seedHosts []string) error {
	e.widen.fingerprint = e.scopeFingerprint(seedHosts)
	if !e.caps.LinkGraph {
		return nil
	}
	var last string
	if raw, ok := stored[linkScopeKey]; ok {
		if err := json.Unmarshal(raw, &last); err != nil {
			return fmt.Errorf("read stored crawl settings: %s %s: %w", linkScopeKey, raw, err)
		}
	}
	if last == e.widen.fingerprint {
		return nil
	}
	c, err := e.db.Counts()
	if err != nil {
		return err
	}
	if c.Fetched+c.Failed == 0 {
		stored[linkScopeKey], _ = json.Marshal(e.widen.fingerprint)
		return nil
	}
	e.widen.pending = true
	if !e.caps.RetryFailed {
		return nil
	}
	now := e.opts.Now()
	n, err := e.db.RequeueFailedWhere(func(r *store.Result) bool {
		if r.ErrorClass != classOutOfScope && r.ErrorClass != classTrap {
			return false
		}
		it := store.Item{Host: r.Host, URL: r.URL, Depth: r.Depth, Referrer: r.Referrer, Kind: r.Kind, Hops: r.RequisiteHops()}
		if r.Depth == 0 {
			it.Redirects = 1 // a seed is never refused: this was a seed's redirect's target
		}
		_, trapped := e.trapped(it, now)
		return !e.outOfScope(it) && !trapped
	})
	if err != nil {
		return fmt.Errorf("queue again what the new scope admits: %w", err)
	}
	if n > 0 {
		e.log.Info("URLs refused by an earlier scope queued again", "count", n)
	}
	return nil
}

// feedWidened reads the link graph and queues what the scope now admits,
// in chunks while the workers crawl; the frontier counts the feed as
// pending work.
func (e *Engine) feedWidened(ctx context.Context, done func()) {
	defer done()
	const chunk = 4096
	var batch []store.Item
	flush := func() error {
		err := e.front.Add(batch...)
		e.widen.queued.Add(int64(len(batch)))
		batch = batch[:0]
		return err
	}
	var links []extract.Link
	var moved []frontier.Link
	err := e.db.ForEachPageLinks(func(p *store.PageLinks) error {
		if !p.Page.Known {
			return nil // a record older than pages were described
		}
		page, err := frontier.ParseLink(p.URL)
		if err != nil {
			return nil
		}
		it := page.Item(p.Page.Depth, 0)
		if p.Page.Hops > 0 {
			it.Kind, it.Hops = store.KindRequisite, p.Page.Hops
		}
		links, moved = links[:0], moved[:0]
		for i := range p.Links {
			l := &p.Links[i]
			if e.db.Seen(l.To) {
				continue // queued once already: most links of most pages
			}
			target, err := frontier.ParseLink(l.Edge.To)
			switch {
			case err != nil:
			case l.Edge.Kind == store.LinkRedirect:
				moved = append(moved, target)
			default:
				links = append(links, extract.Link{Link: target, Kind: scanKind(l.Edge.Kind), Rel: l.Edge.Rel})
			}
		}
		batch = append(batch, e.discoverFrom(it, links, e.followsLinks(p.Page.Directives))...)
		// A redirect's target, at the redirect's depth (record.go's redirect).
		switch {
		case len(moved) == 0:
		case it.Kind == store.KindRequisite:
			batch = append(batch, e.discoverRequisites(it.URL, moved, it.Depth, it.Hops, 1)...)
		default:
			batch = append(batch, e.discover(it.URL, moved, it.Depth, 1)...)
		}
		if len(batch) >= chunk {
			return flush()
		}
		if ctx.Err() != nil || e.stopped() {
			return errWideningStopped
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil && (ctx.Err() != nil || errors.Is(err, frontier.ErrClosed)) {
		err = errWideningStopped
	}
	switch {
	case errors.Is(err, errWideningStopped):
		e.log.Info("link graph read in part: the rest is read next run", "queued", e.widen.queued.Load())
	case err != nil:
		e.log.Error("queue the links a wider scope admits", "err", err)
	default:
		e.widen.done.Store(true)
		e.log.Info("links the new scope admits queued from the link graph", "queued", e.widen.queued.Load())
	}
}

var errWideningStopped = errors.New("the run stopped")

// stopped reports whether the run is ending: nothing more is worth queueing.
func (e *Engine) stopped() bool {
	select {
	case <-e.halted:
		return true
	case <-e.front.Failed():
		return true
	default:
		return false
	}
}

func scanKind(k store.LinkKind) extract.Kind {
	switch k {
	case store.LinkRequisite:
		return extract.Requisite
	case store.LinkFrame:
		return extract.Frame
	}
	return extract.Navigation
}

// storeLinkScope records that the graph has been followed under this
// run's scope, once the run has committed everything it queued.
func (e *Engine) storeLinkScope() error {
	if !e.widen.done.Load() {
		return nil
	}
	stored := map[string]json.RawMessage{}
	data, err := e.db.Settings()
	if err != nil {
		return fmt.Errorf("read stored crawl settings: %w", err)
	}
	if err := json.Unmarshal(data, &stored); err != nil {
		return fmt.Errorf("read stored crawl settings: %w", err)
	}
	stored[linkScopeKey], _ = json.Marshal(e.widen.fingerprint)
	data, _ = json.Marshal(stored)
	if err := e.db.PutSettings(data); err != nil {
		return fmt.Errorf("store crawl settings: %w", err)
	}
	return nil
}
