package sitemap_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"breakwater/sitemap"
)

// FuzzReadLimits reads arbitrary files, gzipped by the test when the
// fuzzer says so, under limits the fuzzer picks (FuzzRead uses fixed ones
// and gets valid gzip only from its seed). Nothing panics; the error is
// nil, fn's own or wraps ErrMalformed or ErrOversized; fn is called at most
// MaxURLs times with entries of the documented form; a file read without
// error had no more than MaxBytes bytes, and is refused as oversized with
// one byte or one entry less allowed, the entries up to the cut the same;
// gzip changes nothing but the bytes on the wire; an error from fn stops
// the reading and is returned as it is.
func FuzzReadLimits(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, maxURLs, maxBytes uint16, gz bool) {
		lim := sitemap.Limits{MaxURLs: int(maxURLs), MaxBytes: int64(maxBytes)}
		in := data
		if gz {
			in = gzipBytes(t, data)
		}
		kind, got, err := readEntries(in, lim)
		effURLs, effBytes := lim.MaxURLs, lim.MaxBytes
		if effURLs == 0 {
			effURLs = sitemap.DefaultMaxURLs
		}
		if effBytes == 0 {
			effBytes = sitemap.DefaultMaxBytes
		}
		// What the limits count: the bytes after one gunzip (enough of
		// them to tell whether there are more than the limit).
		size, sized := int64(len(data)), true
		if !gz && bytes.HasPrefix(data, gzipMagic) {
			plain, gerr := io.ReadAll(io.LimitReader(mustGunzip(data), effBytes+1))
			size, sized = int64(len(plain)), gerr == nil
		}
		if len(got) > effURLs {
			t.Fatalf("%d entries, over MaxURLs %d", len(got), effURLs)
		}
		for _, e := range got {
			if e.Loc == "" || e.Loc != strings.TrimSpace(e.Loc) || len(e.Loc) > sitemap.MaxLocBytes ||
				e.Lastmod != strings.TrimSpace(e.Lastmod) || len(e.Lastmod) > sitemap.MaxLastmodBytes {
				t.Fatalf("entry %q breaks the documented form", e)
			}
		}
		oversized := errors.Is(err, sitemap.ErrOversized)
		if err != nil && !oversized && !errors.Is(err, sitemap.ErrMalformed) {
			t.Fatalf("error %v wraps neither sentinel", err)
		}
		if err == nil && (kind == sitemap.Unknown || sized && size > effBytes) {
			t.Fatalf("no error, kind %v, %d bytes for a limit of %d", kind, size, effBytes)
		}
		if gz && !bytes.HasPrefix(data, gzipMagic) {
			pkind, plain, perr := readEntries(data, lim)
			sameClass := (perr == nil) == (err == nil) && errors.Is(perr, sitemap.ErrOversized) == oversized
			// Over the byte cap, read-ahead may meet the cap before a
			// syntax error or after: either way it is refused.
			if pkind != kind || !slices.Equal(plain, got) || !sameClass && size <= effBytes {
				t.Fatalf("gzipped: %v, %d entries, %v; plain: %v, %d entries, %v", kind, len(got), err, pkind, len(plain), perr)
			}
		}
		if err == nil && sized && size >= 2 {
			// The limits are exact: one byte less is too many.
			lim := sitemap.Limits{MaxURLs: effURLs, MaxBytes: size}
			if _, again, err := readEntries(in, lim); err != nil || !slices.Equal(again, got) {
				t.Fatalf("with MaxBytes at the file's %d bytes: %d entries, %v", size, len(again), err)
			}
			lim.MaxBytes--
			if _, _, err := readEntries(in, lim); !errors.Is(err, sitemap.ErrOversized) {
				t.Fatalf("with MaxBytes one under the file's %d bytes: %v, want ErrOversized", size, err)
			}
		}
		if err == nil && len(got) >= 2 {
			lim := sitemap.Limits{MaxURLs: len(got) - 1, MaxBytes: effBytes}
			_, cut, err := readEntries(in, lim)
			if !errors.Is(err, sitemap.ErrOversized) || !slices.Equal(cut, got[:len(got)-1]) {
				t.Fatalf("with MaxURLs %d of %d entries: %d entries, %v; want the first %d and ErrOversized",
					lim.MaxURLs, len(got), len(cut), err, lim.MaxURLs)
			}
		}
		if len(got) > 0 {
			stop := errors.New("stop")
			calls := 0
			_, err := sitemap.Read(bytes.NewReader(in), lim, func(sitemap.Entry) error {
				calls++
				return stop
			})
			if err != stop || calls != 1 {
				t.Fatalf("fn's error: Read returned %v after %d calls; want fn's error after 1", err, calls)
			}
		}
	})
}

func readEntries(in []byte, lim sitemap.Limits) (sitemap.Kind, []sitemap.Entry, error) {
	var got []sitemap.Entry
	kind, err := sitemap.Read(bytes.NewReader(in), lim, func(e sitemap.Entry) error {
		got = append(got, e)
		return nil
	})
	return kind, got, err
}

var gzipMagic = []byte{0x1f, 0x8b}

// mustGunzip reads data as gzip; a broken stream reads as an error.
func mustGunzip(data []byte) io.Reader {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return iotest.ErrReader(err)
	}
	return zr
}

func gzipBytes(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
