package wacz

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzVerify: Verify reads anything without failing, and when it finds
// nothing wrong, archive/zip reads every entry whole and each resource
// datapackage.json lists hashes as it says, and datapackage.json as its
// digest says.
func FuzzVerify(f *testing.F) {
	dir := f.TempDir()
	warcs := []string{filepath.Join(dir, "a.warc.gz"), filepath.Join(dir, "b.warc.gz")}
	for i, p := range warcs {
		if err := os.WriteFile(p, bytes.Repeat([]byte{byte(i)}, 100*(i+1)), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	var good bytes.Buffer
	_, err := Write(&good, Source{WARCs: warcs, Created: time.Unix(0, 0),
		Index: linesIndex(`com,example)/ 2026 {"filename":"a.warc.gz"}`, `com,example)/b 2026 {"filename":"b.warc.gz"}`),
		Pages: pageList(Page{URL: "http://example.com/", Seed: true}, Page{URL: "http://example.com/b"})})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good.Bytes())
	f.Add([]byte("PK\x05\x06" + string(make([]byte, 18))))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep := verifyZip(bytes.NewReader(data), int64(len(data)), "f.wacz")
		if !rep.OK() {
			return
		}
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("Verify found no problem in what archive/zip cannot open: %v", err)
		}
		content := map[string][]byte{}
		for _, zf := range zr.File {
			rc, err := zf.Open()
			if err != nil {
				t.Fatalf("Verify found no problem, but %s cannot be opened: %v", zf.Name, err)
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatalf("Verify found no problem, but %s cannot be read: %v", zf.Name, err)
			}
			content[zf.Name] = b
		}
		var digest packageDigest
		if json.Unmarshal(content[DigestPath], &digest) != nil || digest.Hash != hexSHA256(content[PackagePath]) {
			t.Fatalf("Verify found no problem, but the digest %q is not datapackage.json's", content[DigestPath])
		}
		var dp dataPackage
		if err := json.Unmarshal(content[PackagePath], &dp); err != nil {
			t.Fatalf("Verify found no problem, but datapackage.json: %v", err)
		}
		for _, r := range dp.Resources {
			if b := content[r.Path]; hexSHA256(b) != r.Hash || int64(len(b)) != r.Bytes {
				t.Fatalf("Verify found no problem, but %s hashes to %s (%d bytes), listed %s (%d)", r.Path, hexSHA256(b), len(b), r.Hash, r.Bytes)
			}
		}
	})
}
