package frontier

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"breakwater/store"
)

// A page's requisites are leased before the pages queued on their host,
// whether those pages are in memory or still only in the file, each once,
// and the pages then follow in their own order.
func TestRequisitesLeasedAheadOfPages(t *testing.T) {
	for _, queuedPages := range []int{3, 40} { // within the buffer; far beyond it
		t.Run(fmt.Sprint(queuedPages, " pages queued"), func(t *testing.T) {
			bubble(t, Options{Buffer: 4}, func(t *testing.T, h *harness) {
				h.add(pageURL("a.test", 0))
				synctest.Wait()
				first := mustLease(t, h.f)
				h.add(pages("a.test", queuedPages+1)[1:]...)
				synctest.Wait()
				var found []store.Item
				var want []string
				for i := range 10 {
					it := item(t, fmt.Sprintf("http://a.test/img%d.png", i))
					it.Kind, it.Hops = store.KindRequisite, 1
					found = append(found, it)
					want = append(want, it.URL)
				}
				if err := h.f.Complete(first, okResult(first.Item), found); err != nil {
					t.Fatal(err)
				}
				got := drain(t, h, 0)
				if !slices.Equal(got[:len(want)], want) {
					t.Fatalf("first leases %q, want the requisites %q first", got[:len(want)], want)
				}
				rest := got[len(want):]
				if wantPages := pages("a.test", queuedPages+1)[1:]; !slices.Equal(rest, wantPages) {
					t.Fatalf("then %d leases %q, want each page once in FIFO order %q", len(rest), rest, wantPages)
				}
			})
		})
	}
}

// Requisites still in the file after a restart are leased, and a
// requisite given back keeps its place at the front.
func TestRequisitesSurviveReopenAndRelease(t *testing.T) {
	bubble(t, Options{Buffer: 4}, func(t *testing.T, h *harness) {
		h.add(pages("a.test", 6)...)
		synctest.Wait()
		first := mustLease(t, h.f)
		var found []store.Item
		for i := range 30 { // beyond what the buffer takes early: the rest wait in the file
			it := item(t, fmt.Sprintf("http://a.test/s%d.css", i))
			it.Kind, it.Hops = store.KindRequisite, 1
			found = append(found, it)
		}
		if err := h.f.Complete(first, okResult(first.Item), found); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		l := mustLease(t, h.f)
		if !strings.HasSuffix(l.Item.URL, "/s0.css") {
			t.Fatalf("leased %s after the page, want its first stylesheet", l.Item.URL)
		}
		h.f.Release(l)
		got := drain(t, h, 5)
		if !strings.HasSuffix(got[0], "/s0.css") {
			t.Fatalf("after a release leased %s first, want s0.css again", got[0])
		}
		seen := map[string]int{}
		for _, u := range got {
			seen[u]++
		}
		for _, u := range append(pages("a.test", 6)[1:], urlsOf(found)...) {
			if seen[u] != 1 {
				t.Errorf("%s leased %d times, want once", u, seen[u])
			}
		}
		if len(got) != 5+len(found) {
			t.Errorf("%d leases, want %d", len(got), 5+len(found))
		}
	})
}

func urlsOf(items []store.Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.URL)
	}
	return out
}
