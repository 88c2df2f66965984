package storage

import (
	"breakwater/store"
	"fmt"
	"testing"
)

const (
	benchBatch = 1000
	benchHosts = 100
)

// benchItems returns benchBatch distinct items spread over benchHosts hosts;
// round makes them distinct from other rounds' items.
func benchItems(round int) []store.Item {
	items := make([]store.Item, benchBatch)
	for i := range items {
		host := fmt.Sprintf("host%03d.example:8080", i%benchHosts)
		items[i] = item(host, fmt.Sprintf("/r%d/page/%d?q=%d", round, i, i*7))
		items[i].Depth = 1 + i%5
	}
	return items
}

func reportURLRate(b *testing.B) {
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "urls/s")
}

// BenchmarkEnqueue measures one Commit of benchBatch new URLs: the cost the
// frontier pays per batch of discovered links.
func BenchmarkEnqueue(b *testing.B) {
	db := openTestDB(b)
	db.bolt.NoSync = false // the fsyncs are what batching pays for
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		items := benchItems(i)
		var batch store.Batch
		for _, it := range items {
			batch.Add(it)
		}
		b.StartTimer()
		c, err := db.Commit(&batch)
		if err != nil {
			b.Fatal(err)
		}
		if len(c.Added) != benchBatch {
			b.Fatalf("added %d, want %d", len(c.Added), benchBatch)
		}
	}
	reportURLRate(b)
}

// BenchmarkCompleteBatch measures loading benchBatch queued URLs host by host
// and storing their results in one Commit.
func BenchmarkCompleteBatch(b *testing.B) {
	db := openTestDB(b)
	db.bolt.NoSync = false // the fsyncs are what batching pays for
	perHost := benchBatch / benchHosts
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		added := enqueue(b, db, benchItems(i)...)
		hosts := make([]string, 0, benchHosts)
		for _, it := range added[:benchHosts] {
			hosts = append(hosts, it.Host)
		}
		b.StartTimer()
		var batch store.Batch
		for _, h := range hosts {
			items, err := db.LoadQueued(h, 0, perHost)
			if err != nil {
				b.Fatal(err)
			}
			for _, it := range items {
				r := fetched(it, 200)
				r.ContentType, r.Length, r.Title = "text/html", 12345, "A page title"
				batch.Complete(it, r)
			}
		}
		if batch.Len() != benchBatch {
			b.Fatalf("completing %d, want %d", batch.Len(), benchBatch)
		}
		if _, err := db.Commit(&batch); err != nil {
			b.Fatal(err)
		}
	}
	reportURLRate(b)
}

// BenchmarkPutLinks measures one Commit of the link graph of 500 pages of a
// 500-page site, 8 links each to other pages of it, after a first commit
// named every URL: most link targets are in the URL table already, as in a
// crawl, where each page is linked from several others.
func BenchmarkPutLinks(b *testing.B) {
	const pages, perPage = 500, 8
	db := openTestDB(b)
	site := make([]store.Item, pages)
	for i := range site {
		site[i] = item(fmt.Sprintf("host%02d.example", i%50), fmt.Sprintf("/p/%d", i))
	}
	batchOf := func() *store.Batch {
		var batch store.Batch
		for i, page := range site {
			links := make([]store.Outlink, perPage)
			for j := range links {
				to := site[(i*7+j*13+1)%pages]
				links[j] = store.Outlink{To: to.Hash, Edge: store.Edge{From: page.URL, To: to.URL, Kind: store.LinkNavigation}}
			}
			batch.PutLinks(page, links, nil)
		}
		return &batch
	}
	if _, err := db.Commit(batchOf()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		batch := batchOf()
		b.StartTimer()
		if _, err := db.Commit(batch); err != nil {
			b.Fatal(err)
		}
	}
}
