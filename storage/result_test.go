package storage

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

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
		ErrorClass:  str("error_class"),
		Error:       str("error"),
	}
	r.FinalURL = r.URL
	if rapid.Bool().Draw(t, "redirected") {
		r.FinalURL = str("final_url")
	}
	if rapid.Bool().Draw(t, "fetched") {
		r.FetchedAt = time.Unix(0, rapid.Int64().Draw(t, "fetched_at"))
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
		hash, got, err := decodeResult(rec)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if hash != it.Hash {
			t.Fatalf("hash %x, want %x", hash, it.Hash)
		}
		if !got.FetchedAt.Equal(r.FetchedAt) || got.FetchedAt.IsZero() != r.FetchedAt.IsZero() {
			t.Fatalf("fetched_at %v, want %v", got.FetchedAt, r.FetchedAt)
		}
		got.FetchedAt, r.FetchedAt = time.Time{}, time.Time{}
		if got != r {
			t.Fatalf("decoded\n%+v\nwant\n%+v", got, r)
		}
		head, err := parseResultHead(rec)
		if err != nil {
			t.Fatal(err)
		}
		wantClass := r.ErrorClass[:min(len(r.ErrorClass), maxClassLen)]
		if head.failed != r.Failed() || head.status != min(max(r.Status, 0), 0xFFFF) || head.class != wantClass {
			t.Fatalf("header failed=%v status=%d class=%q, want %v %d %q", head.failed, head.status, head.class,
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
		if _, _, err := decodeResult(rec[:cut]); !errors.Is(err, errBadResult) {
			t.Fatalf("record cut to %d of %d bytes: err %v, want errBadResult", cut, len(rec), err)
		}
		long := append(append([]byte(nil), rec...), rapid.SliceOfN(rapid.Byte(), 1, 8).Draw(t, "extra")...)
		if _, _, err := decodeResult(long); !errors.Is(err, errBadResult) {
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
	f.Fuzz(func(t *testing.T, data []byte) {
		_, got, err := decodeResult(data)
		if err != nil {
			return
		}
		// Whatever decodes must encode back to a record that decodes alike.
		_, again, err := decodeResult(EncodeResult(Item{}, &got))
		if err != nil || !again.FetchedAt.Equal(got.FetchedAt) {
			t.Fatalf("re-encoded record: %v, fetched_at %v vs %v", err, again.FetchedAt, got.FetchedAt)
		}
		again.FetchedAt, got.FetchedAt = time.Time{}, time.Time{}
		if again != got {
			t.Fatalf("re-encoded\n%+v\nwant\n%+v", again, got)
		}
	})
}
