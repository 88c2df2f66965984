package warc

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeFile writes entries (and a warcinfo) to dir as one finished file.
func writeFile(t *testing.T, dir string, entries ...[]byte) {
	t.Helper()
	w := &Writer{opts: Options{Software: "test", Hostname: "h"}}
	info, err := w.warcinfo("x.warc.gz", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	data := append([]byte(nil), info...)
	for _, e := range entries {
		data = append(data, e...)
	}
	if err := os.WriteFile(filepath.Join(dir, "x.warc.gz"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func gz(t *testing.T, s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	zw.Close()
	return b.Bytes()
}

func TestCheckFindsWhatIsWrong(t *testing.T) {
	entry, err := encode(exchange("http://127.0.0.1:1/a", "body", time.Now()), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	good := struct{ data []byte }{}
	if good.data, err = entry.data.Bytes(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		data []byte
		want string
	}{
		"a payload that does not match its digest": {
			data: gz(t, "WARC/1.1\r\nWARC-Type: resource\r\nWARC-Record-ID: <urn:uuid:11111111-1111-1111-1111-111111111111>\r\n"+
				"WARC-Date: 2026-12-01T10:00:00Z\r\nWARC-Target-URI: http://127.0.0.1:1/r\r\nContent-Type: text/plain\r\n"+
				"WARC-Block-Digest: sha1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\r\nContent-Length: 5\r\n\r\nhello\r\n\r\n"),
			want: "digest",
		},
		"a response without its request": {
			data: gz(t, string(mustRest(t, good.data))), // the entry without its first member, the request
			want: "no request paired",
		},
		"a file cut in the middle of a record": {
			data: good.data[:len(good.data)-20],
			want: "unreadable",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, c.data)
			rep, err := Check(dir)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() || !strings.Contains(strings.Join(rep.Problems, "\n"), c.want) {
				t.Fatalf("problems %q, want one mentioning %q", rep.Problems, c.want)
			}
		})
	}
	t.Run("a good entry and an unfinished file", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, good.data)
		if rep, _ := Check(dir); !rep.OK() {
			t.Fatalf("a good file has problems: %v", rep.Problems)
		}
		os.WriteFile(filepath.Join(dir, "y.warc.gz.open"), nil, 0o644)
		if rep, _ := Check(dir); rep.OK() || len(rep.Unfinished) != 1 {
			t.Fatalf("an .open file was not reported: %+v", rep)
		}
	})
}

// mustRest returns the uncompressed text of every gzip member of data but
// the first.
func mustRest(t *testing.T, data []byte) []byte {
	t.Helper()
	r := bytes.NewReader(data)
	zr, err := gzip.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	zr.Multistream(false)
	var skip bytes.Buffer
	skip.ReadFrom(zr)
	if err := zr.Reset(r); err != nil {
		t.Fatal(err)
	}
	var rest bytes.Buffer
	rest.ReadFrom(zr)
	return rest.Bytes()
}
