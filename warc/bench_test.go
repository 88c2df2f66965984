package warc

import (
	"strings"
	"testing"
	"time"
)

// BenchmarkEncode is the per-page cost a worker pays for the archive: a
// request and a response record of a 3 KB page, compressed.
func BenchmarkEncode(b *testing.B) {
	body := strings.Repeat("<p>some text of a page, with <a href=\"/p/1\">links</a></p>\n", 55)
	ex := exchange("http://127.0.0.1:1/p/1", body, time.Now())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := encode(ex, nil, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
}
