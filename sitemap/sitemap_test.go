package sitemap

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

const urlset = `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url>
    <loc>
      http://example.com/a
    </loc>
    <lastmod>2024-05-01</lastmod>
    <changefreq>daily</changefreq>
  </url>
  <url><loc>http://example.com/b?x=1&amp;y=2</loc></url>
  <url><lastmod>2024-01-01</lastmod></url>
</urlset>`

func readAll(t *testing.T, r io.Reader, lim Limits) (Kind, []Entry, error) {
	t.Helper()
	var got []Entry
	kind, err := Read(r, lim, func(e Entry) error {
		got = append(got, e)
		return nil
	})
	return kind, got, err
}

func gzipped(t testing.TB, s string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := io.WriteString(zw, s); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRead(t *testing.T) {
	plain := []Entry{{Loc: "http://example.com/a", Lastmod: "2024-05-01"}, {Loc: "http://example.com/b?x=1&y=2"}}
	tests := []struct {
		name string
		body []byte
		kind Kind
		want []Entry
	}{
		{"plain urlset", []byte(urlset), URLSet, plain},
		// Served as text/html or application/octet-stream, named .xml:
		// only the content says it is gzip.
		{"gzip by content", gzipped(t, urlset), URLSet, plain},
		{"index", []byte(`<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
			<sitemap><loc>http://example.com/s1.xml</loc><lastmod>2024-02-02T10:00:00+00:00</lastmod></sitemap>
			<sitemap><loc>http://example.com/s2.xml.gz</loc></sitemap>
			</sitemapindex>`), Index,
			[]Entry{{Loc: "http://example.com/s1.xml", Lastmod: "2024-02-02T10:00:00+00:00"}, {Loc: "http://example.com/s2.xml.gz"}}},
		// Elements by local name, whatever the prefix; extension elements
		// nested in an entry do not give it their <loc>.
		{"namespaces", []byte(`<sm:urlset xmlns:sm="http://www.sitemaps.org/schemas/sitemap/0.9"
			xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
			<sm:url><image:image><image:loc>http://example.com/i.png</image:loc></image:image>
			<sm:loc>http://example.com/p</sm:loc></sm:url>
			<sm:url><image:image><image:loc>http://example.com/only-image.png</image:loc></image:image></sm:url>
			</sm:urlset>`), URLSet, []Entry{{Loc: "http://example.com/p"}}},
		{"no namespace, comments", []byte(`<!-- generated --><urlset><url><loc>http://e/x</loc></url></urlset>`),
			URLSet, []Entry{{Loc: "http://e/x"}}},
		{"url elements in an index are not sitemaps", []byte(`<sitemapindex><url><loc>http://e/x</loc></url></sitemapindex>`),
			Index, nil},
		{"overlong lastmod dropped, entry kept", []byte(`<urlset><url><loc>http://e/x</loc><lastmod>` +
			strings.Repeat("9", MaxLastmodBytes+1) + `</lastmod></url></urlset>`), URLSet, []Entry{{Loc: "http://e/x"}}},
		{"overlong loc dropped", []byte(`<urlset><url><loc>http://e/` + strings.Repeat("a", MaxLocBytes) +
			`</loc></url><url><loc>http://e/y</loc></url></urlset>`), URLSet, []Entry{{Loc: "http://e/y"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, got, err := readAll(t, bytes.NewReader(tt.body), Limits{})
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if kind != tt.kind {
				t.Errorf("kind = %v, want %v", kind, tt.kind)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("entries = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReadRefuses(t *testing.T) {
	tests := []struct {
		name string
		body []byte
		lim  Limits
		want error
	}{
		{"unclosed element", []byte(`<urlset><url><loc>http://e/x</loc></url>`), Limits{}, ErrMalformed},
		{"mismatched tags", []byte(`<urlset><url><loc>http://e/x</url></loc></urlset>`), Limits{}, ErrMalformed},
		{"unknown entity", []byte(`<urlset><url><loc>http://e/&bomb;</loc></url></urlset>`), Limits{}, ErrMalformed},
		{"html soft 404", []byte("<!DOCTYPE html>\n<html><head><title>Not here</title></head><body></body></html>"), Limits{}, ErrMalformed},
		{"empty", nil, Limits{}, ErrMalformed},
		{"text, not XML", []byte("http://e/a\nhttp://e/b\n"), Limits{}, ErrMalformed},
		{"two roots", []byte(`<urlset></urlset><urlset></urlset>`), Limits{}, ErrMalformed},
		{"corrupt gzip", append([]byte{0x1f, 0x8b}, []byte("not really gzip at all")...), Limits{}, ErrMalformed},
		{"truncated gzip", gzipped(t, urlset)[:40], Limits{}, ErrMalformed},
		{"not UTF-8", []byte(`<?xml version="1.0" encoding="Shift_JIS"?><urlset></urlset>`), Limits{}, ErrMalformed},
		{"too many entries", []byte(entries(11)), Limits{MaxURLs: 10}, ErrOversized},
		{"too many bytes", []byte(entries(100)), Limits{MaxBytes: 1000}, ErrOversized},
		{"too many bytes gzipped", gzipped(t, entries(100)), Limits{MaxBytes: 1000}, ErrOversized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := readAll(t, bytes.NewReader(tt.body), tt.lim)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Read: err = %v, want %v", err, tt.want)
			}
		})
	}
}

// entries is a urlset of n entries.
func entries(n int) string {
	var b strings.Builder
	b.WriteString(`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for i := range n {
		fmt.Fprintf(&b, "<url><loc>http://example.com/%d</loc></url>\n", i)
	}
	b.WriteString(`</urlset>`)
	return b.String()
}

func TestReadLimitsAtTheEdge(t *testing.T) {
	doc := entries(10)
	if _, got, err := readAll(t, strings.NewReader(doc), Limits{MaxURLs: 10, MaxBytes: int64(len(doc))}); err != nil || len(got) != 10 {
		t.Fatalf("a file exactly at both limits: %d entries, err %v; want 10, nil", len(got), err)
	}
	calls := 0
	_, err := Read(strings.NewReader(entries(DefaultMaxURLs+1)), Limits{}, func(Entry) error { calls++; return nil })
	if !errors.Is(err, ErrOversized) || calls != DefaultMaxURLs {
		t.Fatalf("%d entries: %d calls, err %v; want %d calls and ErrOversized", DefaultMaxURLs+1, calls, err, DefaultMaxURLs)
	}
	if !strings.Contains(err.Error(), "50000") {
		t.Errorf("error %q does not name the limit", err)
	}
}

func TestReadStopsOnCallbackError(t *testing.T) {
	stop := errors.New("stop")
	calls := 0
	_, err := Read(strings.NewReader(entries(5)), Limits{}, func(Entry) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Fatalf("calls %d, err %v; want 1 call and the callback's error as is", calls, err)
	}
}

// bomb streams a gzip file that inflates to size bytes: a valid urlset
// opening, then white space (valid XML, so only the byte cap can stop it).
// It is written as it is read, so a reader that stops early stops the
// compression too: the test costs what the cap lets through, not a GB.
func bomb(size int64) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		zw, _ := gzip.NewWriterLevel(pw, gzip.DefaultCompression)
		head := `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://e/x</loc></url>`
		_, err := io.WriteString(zw, head)
		spaces := bytes.Repeat([]byte(" "), 1<<16)
		for left := size - int64(len(head)); err == nil && left > 0; left -= int64(len(spaces)) {
			_, err = zw.Write(spaces[:min(left, int64(len(spaces)))])
		}
		if err == nil {
			err = zw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

func TestReadGzipBomb(t *testing.T) {
	// 1 GiB of white space compresses to about 1 MB; the reader must stop
	// at its cap. countingReader shows how much of the bomb was inflated.
	const gib = 1 << 30
	src := bomb(gib)
	defer src.Close()
	counted := &countingReader{r: src}
	lim := Limits{MaxBytes: 1 << 20}
	kind, got, err := readAll(t, counted, lim)
	if !errors.Is(err, ErrOversized) {
		t.Fatalf("Read of a 1 GiB gzip bomb: err = %v, want ErrOversized", err)
	}
	if kind != URLSet || len(got) != 1 {
		t.Errorf("kind %v, %d entries before the cap; want urlset, 1", kind, len(got))
	}
	// The compressed bytes read are a tiny fraction of the bomb: had it been
	// inflated whole, about 1 MB of it would have been read.
	if counted.n > 16<<10 {
		t.Errorf("read %d compressed bytes for a %d-byte cap: the bomb was inflated past the cap", counted.n, lim.MaxBytes)
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func FuzzRead(f *testing.F) {
	f.Add([]byte(urlset))
	f.Add(gzipped(f, urlset))
	f.Add([]byte(entries(3)))
	f.Add([]byte(`<sitemapindex><sitemap><loc>http://e/s.xml</loc></sitemap></sitemapindex>`))
	f.Add([]byte(`<a:urlset xmlns:a="x"><a:url><a:loc> http://e/ </a:loc><b:loc>y</b:loc></a:url></a:urlset>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := Limits{MaxURLs: 3, MaxBytes: 1 << 16}
		calls := 0
		kind, err := Read(bytes.NewReader(data), lim, func(e Entry) error {
			calls++
			if e.Loc == "" || e.Loc != strings.TrimSpace(e.Loc) || len(e.Loc) > MaxLocBytes || len(e.Lastmod) > MaxLastmodBytes {
				t.Errorf("entry %q breaks the documented form", e)
			}
			return nil
		})
		if calls > lim.MaxURLs {
			t.Fatalf("%d calls, more than the cap %d", calls, lim.MaxURLs)
		}
		if err == nil && kind == Unknown {
			t.Fatal("no error and no kind")
		}
		if err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrOversized) {
			t.Fatalf("error %v wraps neither sentinel", err)
		}
	})
}
