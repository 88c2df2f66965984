package store

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func nonZero(n int64) bool { return n != 0 }

func drawResult(t *rapid.T) Result {
	str := func(label string) string { return rapid.String().Draw(t, label) }
	r := Result{
		URL:         str("url"),
		Host:        str("host"),
		Status:      rapid.IntRange(math.MinInt32, math.MaxInt32).Draw(t, "status"),
		ContentType: str("content_type"),
		Length:      rapid.Int64().Draw(t, "length"),
		Truncated:   rapid.Bool().Draw(t, "truncated"),
		DurationMS:  rapid.Int64().Draw(t, "duration_ms"),
		Depth:       rapid.Int().Draw(t, "depth"),
		Title:       str("title"),
		Outlinks:    rapid.Int().Draw(t, "outlinks"),
		Attempts:    rapid.Int().Draw(t, "attempts"),
		Kind:        ItemKind(rapid.IntRange(0, 2).Draw(t, "kind")),
		ErrorClass:  str("error_class"),
		Error:       str("error"),
	}
	r.FinalURL = r.URL
	if rapid.Bool().Draw(t, "redirected") {
		r.FinalURL = str("final_url")
	}
	if rapid.Bool().Draw(t, "validators") {
		r.ETag, r.LastModified = str("etag"), str("last_modified")
	}
	if rapid.Bool().Draw(t, "origin") {
		r.Referrer, r.Location, r.Lastmod = str("referrer"), str("location"), str("lastmod")
	}
	if rapid.Bool().Draw(t, "fetched") {
		r.FetchedAt = time.Unix(0, rapid.Int64().Draw(t, "fetched_at"))
	}
	switch rapid.IntRange(0, 2).Draw(t, "archived") {
	case 1: // the page's own record
		r.Archived = Capture{URI: r.URL, Date: time.Unix(0, rapid.Int64().Filter(nonZero).Draw(t, "archived_at"))}
	case 2: // the record of an identical payload at another URL
		r.Archived = Capture{URI: rapid.StringN(1, -1, -1).Draw(t, "archived_uri"),
			Date: time.Unix(0, rapid.Int64().Filter(nonZero).Draw(t, "archived_at"))}
	}
	if rapid.Bool().Draw(t, "page_facts") {
		r.Robots = Directives(rapid.IntRange(0, int(allDirectives)).Draw(t, "robots"))
		r.Canonical, r.Description, r.H1, r.Lang = str("canonical"), str("description"), str("h1"), str("lang")
		for i := range rapid.IntRange(0, 3).Draw(t, "alternates") {
			r.Hreflang = append(r.Hreflang, Alternate{Hreflang: str(fmt.Sprint("hreflang", i)), URL: str(fmt.Sprint("alternate", i))})
		}
	}
	switch rapid.IntRange(0, 2).Draw(t, "sha_form") {
	case 0: // the crawler's own form: 64 lowercase hex digits
		r.SHA256 = rapid.StringMatching(`[0-9a-f]{64}`).Draw(t, "sha256")
	case 1: // anything else must come back as it was
		r.SHA256 = rapid.StringMatching(`[0-9a-fA-F]{64}`).Draw(t, "sha256")
	default:
		r.SHA256 = str("sha256")
	}
	return r
}

// Every field of every Result survives the binary form, and the header
// carries what commits read without decoding the body.
func TestResultRecordRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := drawResult(t)
		var it Item
		copy(it.Hash[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "hash"))
		rec := EncodeResult(it, &r)
		hash, got, err := DecodeResult(rec)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if hash != it.Hash {
			t.Fatalf("hash %x, want %x", hash, it.Hash)
		}
		if !got.FetchedAt.Equal(r.FetchedAt) || got.FetchedAt.IsZero() != r.FetchedAt.IsZero() {
			t.Fatalf("fetched_at %v, want %v", got.FetchedAt, r.FetchedAt)
		}
		if !got.Archived.Date.Equal(r.Archived.Date) || got.Archived.Date.IsZero() != r.Archived.Date.IsZero() ||
			got.Archived.URI != r.Archived.URI {
			t.Fatalf("archived %+v, want %+v", got.Archived, r.Archived)
		}
		if at, ok := PageFetchedAt(rec); ok == r.Failed() || ok && (!at.Equal(r.FetchedAt) || at.IsZero() != r.FetchedAt.IsZero()) {
			t.Fatalf("PageFetchedAt %v %v, want %v for a page (failed: %v)", at, ok, r.FetchedAt, r.Failed())
		}
		got.FetchedAt, r.FetchedAt = time.Time{}, time.Time{}
		got.Archived, r.Archived = Capture{}, Capture{}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("decoded\n%+v\nwant\n%+v", got, r)
		}
		head, err := ParseRecordHead(rec)
		if err != nil {
			t.Fatal(err)
		}
		wantClass := r.ErrorClass[:min(len(r.ErrorClass), maxClassLen)]
		if head.Failed != r.Failed() || head.Status != min(max(r.Status, 0), 0xFFFF) || head.Class != wantClass {
			t.Fatalf("header failed=%v status=%d class=%q, want %v %d %q", head.Failed, head.Status, head.Class,
				r.Failed(), r.Status, wantClass)
		}
	})
}

// A record cut short anywhere, or with bytes after its end, is reported as
// malformed rather than decoded into a wrong Result.
func TestResultRecordDamage(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := drawResult(t)
		rec := EncodeResult(Item{}, &r)
		cut := rapid.IntRange(0, len(rec)-1).Draw(t, "cut")
		if _, _, err := DecodeResult(rec[:cut]); !errors.Is(err, errBadResult) {
			t.Fatalf("record cut to %d of %d bytes: err %v, want errBadResult", cut, len(rec), err)
		}
		long := append(append([]byte(nil), rec...), rapid.SliceOfN(rapid.Byte(), 1, 8).Draw(t, "extra")...)
		if _, _, err := DecodeResult(long); !errors.Is(err, errBadResult) {
			t.Fatalf("record with trailing bytes: err %v, want errBadResult", err)
		}
	})
}

// The point of the binary form: a typical page's record is well under half
// the size of its JSON, which it replaced.
func TestResultRecordIsCompact(t *testing.T) {
	r := Result{
		URL: "http://127.0.0.1:41234/section/7/page-123.html", Host: "127.0.0.1:41234", Status: 200,
		ContentType: "text/html; charset=utf-8", Length: 4812, FetchedAt: time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC),
		DurationMS: 12, Depth: 3, Title: "Page 123 of section 7", Outlinks: 14,
		SHA256: strings.Repeat("0123456789abcdef", 4), Attempts: 1,
	}
	r.FinalURL = r.URL
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	rec := EncodeResult(Item{}, &r)
	if len(rec)*2 > len(js) {
		t.Fatalf("record is %d bytes, JSON %d: want under half", len(rec), len(js))
	}
}

func FuzzDecodeResult(f *testing.F) {
	r := Result{URL: "http://a.test/", FinalURL: "http://a.test/", Host: "a.test", Status: 200,
		SHA256: strings.Repeat("ab", 32), FetchedAt: time.Unix(1, 0)}
	f.Add([]byte(EncodeResult(Item{}, &r)))
	r.ErrorClass, r.Error, r.FinalURL = "transient", "timeout", "http://b.test/"
	f.Add([]byte(EncodeResult(Item{}, &r)))
	r.ETag, r.LastModified = `"v2"`, "Tue, 01 Dec 2026 10:00:00 GMT"
	f.Add([]byte(EncodeResult(Item{}, &r)))
	r.Archived = Capture{URI: "http://c.test/", Date: time.Unix(1, 5)}
	f.Add([]byte(EncodeResult(Item{}, &r)))
	r.Kind, r.Robots, r.Canonical, r.H1 = KindRequisite, Noindex|Nofollow, "http://a.test/c", "Welcome"
	r.Hreflang = []Alternate{{Hreflang: "de", URL: "http://a.test/de/"}}
	f.Add([]byte(EncodeResult(Item{}, &r)))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, got, err := DecodeResult(data)
		if err != nil {
			return
		}
		// Whatever decodes must encode back to a record that decodes alike.
		_, again, err := DecodeResult(EncodeResult(Item{}, &got))
		if err != nil || !again.FetchedAt.Equal(got.FetchedAt) {
			t.Fatalf("re-encoded record: %v, fetched_at %v vs %v", err, again.FetchedAt, got.FetchedAt)
		}
		again.FetchedAt, got.FetchedAt = time.Time{}, time.Time{}
		if !reflect.DeepEqual(again, got) {
			t.Fatalf("re-encoded\n%+v\nwant\n%+v", again, got)
		}
	})
}

// Result records exactly as the code before validators (ETag,
// LastModified) wrote them: a page, and a failure whose final URL differs,
// whose SHA256 is not a digest and whose body was truncated.
const (
	oldPageRecord = "5053702064484a012c557cc353f46e033f00c8000911687474703a2f2f612e746573742f702f3106612e7465737490" +
		"0309746578742f68746d6ce03080f3a7b0c1a5e2ec3118020d612e74657374207061676520310e9f86d081884c7d659a2feaa0c5" +
		"5ad015a3bf4f1b2b0b822cd15d6c15b0f00a08020000"
	// A requisite as the code before the page's own facts (robots,
	// canonical...) wrote it: its Kind byte ends it.
	oldRequisiteRecord = "506bfc58a1fc40f2e6b66f004ea213049a00c800a917687474703a2f2f612e746573742f7374796c652e63737306612e74" +
		"657374900308746578742f637373d80c80e0f6c3beace2ec31040200009f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822c" +
		"d15d6c15b0f00a0802000011687474703a2f2f612e746573742f702f31000002"
	oldFailureRecord = "46e1df1af0b93a33860b3b38c78644e9e20194097065726d616e656e740212687474703a2f2f612e746573742f676f6e65" +
		"17687474703a2f2f612e746573742f656c7365776865726506612e74657374a8060a746578742f706c61696e148080bcbfffa8e2ec31" +
		"060000000c6e6f742d612d64696765737404097065726d616e656e740a73746174757320343034"
)

func TestDecodeResultsWrittenBefore(t *testing.T) {
	page := Result{URL: "http://a.test/p/1", FinalURL: "http://a.test/p/1", Host: "a.test", Status: 200,
		ContentType: "text/html", Length: 3120, FetchedAt: time.Date(2026, 11, 30, 8, 15, 0, 123_000_000, time.UTC),
		DurationMS: 12, Depth: 1, Title: "a.test page 1", Outlinks: 7, Attempts: 1,
		SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}
	gone := Result{URL: "http://a.test/gone", FinalURL: "http://a.test/elsewhere", Host: "a.test", Status: 404,
		ContentType: "text/plain", Length: 10, Truncated: true, FetchedAt: time.Date(2026, 11, 30, 8, 16, 0, 0, time.UTC),
		DurationMS: 3, SHA256: "not-a-digest", Attempts: 2, ErrorClass: "permanent", Error: "status 404"}
	css := Result{URL: "http://a.test/style.css", FinalURL: "http://a.test/style.css", Host: "a.test", Status: 200,
		ContentType: "text/css", Length: 812, FetchedAt: time.Date(2026, 11, 30, 8, 17, 0, 0, time.UTC),
		DurationMS: 2, Depth: 1, Attempts: 1, Referrer: "http://a.test/p/1", Kind: KindRequisite,
		SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}
	for _, tt := range []struct {
		name, record string
		want         Result
	}{{"page", oldPageRecord, page}, {"failure", oldFailureRecord, gone}, {"requisite", oldRequisiteRecord, css}} {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := hex.DecodeString(tt.record)
			if err != nil {
				t.Fatal(err)
			}
			h, got, err := DecodeResult(rec)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if h != HashOf(tt.want.URL) || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("decoded %x\n%+v\nwant %x\n%+v", h, got, HashOf(tt.want.URL), tt.want)
			}
			// Without validators a result is written as it was before them.
			again := EncodeResult(Item{Hash: h}, &got)
			if hex.EncodeToString(again) != tt.record {
				t.Fatalf("re-encoded as\n%x\nwant\n%s", again, tt.record)
			}
		})
	}
}

func TestValidatorsRoundTrip(t *testing.T) {
	it := Item{Host: "a.test", URL: "http://a.test/", Hash: HashOf("http://a.test/")}
	ok200 := func(it Item) *Result { return &Result{URL: it.URL, FinalURL: it.URL, Host: it.Host, Status: 200} }
	r := ok200(it)
	r.ETag, r.LastModified = `W/"abc-1"`, "Tue, 01 Dec 2026 10:00:00 GMT"
	_, got, err := DecodeResult(EncodeResult(it, r))
	if err != nil || got.ETag != r.ETag || got.LastModified != r.LastModified {
		t.Fatalf("decoded validators %q, %q (%v); want %q, %q", got.ETag, got.LastModified, err, r.ETag, r.LastModified)
	}
	js, _ := json.Marshal(r)
	if !strings.Contains(string(js), `"etag":"W/\"abc-1\""`) || !strings.Contains(string(js), `"last_modified":"Tue, 01 Dec 2026 10:00:00 GMT"`) {
		t.Errorf("JSON %s lacks etag and last_modified", js)
	}
	js, _ = json.Marshal(ok200(it))
	if strings.Contains(string(js), "etag") || strings.Contains(string(js), "last_modified") {
		t.Errorf("JSON of a result without validators names them: %s", js)
	}
}

// What a page says about itself is exported under its own names, and left
// out when the page says nothing.
func TestPageFactsJSON(t *testing.T) {
	r := Result{URL: "http://a.test/", Robots: Noindex | Nofollow, Canonical: "http://a.test/home",
		Hreflang: []Alternate{{Hreflang: "de", URL: "http://a.test/de/"}}, Description: "About a.", H1: "Welcome", Lang: "en"}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"robots":["noindex","nofollow"]`, `"canonical":"http://a.test/home"`,
		`"hreflang":[{"hreflang":"de","url":"http://a.test/de/"}]`, `"description":"About a."`, `"h1":"Welcome"`, `"lang":"en"`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("JSON %s lacks %s", js, want)
		}
	}
	var back Result
	if err := json.Unmarshal(js, &back); err != nil || !reflect.DeepEqual(back, r) {
		t.Errorf("JSON read back as %+v (%v), want %+v", back, err, r)
	}
	js, _ = json.Marshal(Result{URL: "http://a.test/"})
	for _, name := range []string{"robots", "canonical", "hreflang", "description", `"h1"`, `"lang"`} {
		if strings.Contains(string(js), name) {
			t.Errorf("JSON of a result without page facts names %s: %s", name, js)
		}
	}
}

// The extension byte admits only what the encoder writes: an unknown bit,
// an empty one or an empty robots byte is damage, not a result.
func TestResultExtensionDamage(t *testing.T) {
	r := Result{URL: "http://a.test/", FinalURL: "http://a.test/", Robots: Noarchive}
	rec := EncodeResult(Item{}, &r)
	if rec[len(rec)-2] != extRobots || rec[len(rec)-1] != byte(Noarchive) {
		t.Fatalf("record ends %x, want the extension %x and robots %x", rec[len(rec)-2:], extRobots, Noarchive)
	}
	for name, tail := range map[string][]byte{
		"unknown bit": {extRobots | 0x80, byte(Noarchive)}, "empty extension": {0},
		"empty robots": {extRobots, 0}, "unknown directive": {extRobots, 0x40},
	} {
		bad := append(append([]byte(nil), rec[:len(rec)-2]...), tail...)
		if _, _, err := DecodeResult(bad); !errors.Is(err, errBadResult) {
			t.Errorf("%s: err %v, want errBadResult", name, err)
		}
	}
}
