package wacz

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxManifest bounds what Verify reads of datapackage.json and its
// digest: a manifest lists one entry a file, far below this.
const maxManifest = 64 << 20

// Report is what Verify found in a WACZ.
type Report struct {
	// Checked counts the resources whose hash and size were recomputed.
	Checked int
	// Problems name the file each is about: a hash or size that differs
	// from datapackage.json, a file missing or not listed, a WARC file
	// compressed again, a manifest that does not parse.
	Problems []string
}

// OK reports whether every hash and size matched.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

func (r *Report) addf(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// Verify reads the WACZ at path and recomputes the sha256 and size of
// every file datapackage.json lists, and the hash of datapackage.json
// that datapackage-digest.json gives. Its error is for a file that cannot
// be read at all; what is wrong inside the package is in the Report.
func Verify(path string) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("wacz --verify: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("wacz --verify: %w", err)
	}
	return verifyZip(f, st.Size(), path), nil
}

// verifyZip is Verify of the size bytes of r, named name in the report.
func verifyZip(r io.ReaderAt, size int64, name string) *Report {
	rep := &Report{}
	zr, err := zip.NewReader(r, size)
	if err != nil {
		rep.addf("%s: not a readable ZIP file: %v", name, err)
		return rep
	}
	entries := map[string]*zip.File{}
	for _, zf := range zr.File {
		if entries[zf.Name] != nil {
			rep.addf("%s: in the ZIP twice", zf.Name)
		}
		entries[zf.Name] = zf
	}
	manifest, ok := rep.readManifest(entries)
	if !ok {
		return rep
	}
	listed := rep.checkResources(manifest.Resources, entries)
	for _, zf := range zr.File {
		name := zf.Name
		if !listed[name] && name != PackagePath && name != DigestPath && !strings.HasSuffix(name, "/") {
			rep.addf("%s: in the ZIP but not listed in %s", name, PackagePath)
		}
	}
	rep.checkLayout(listed)
	return rep
}

// readManifest reads datapackage.json, checked against its digest.
func (r *Report) readManifest(entries map[string]*zip.File) (*dataPackage, bool) {
	data, err := readEntry(entries, PackagePath)
	if err != nil {
		r.addf("%s: %v", PackagePath, err)
		return nil, false
	}
	digestData, err := readEntry(entries, DigestPath)
	if err != nil {
		r.addf("%s: %v", DigestPath, err)
	} else {
		var d packageDigest
		switch err := json.Unmarshal(digestData, &d); {
		case err != nil:
			r.addf("%s: not JSON: %v", DigestPath, err)
		case d.Path != PackagePath:
			r.addf("%s: path is %q, want %q", DigestPath, d.Path, PackagePath)
		case d.Hash != sha256String(data):
			r.addf("%s: hash %s, but %s hashes to %s", DigestPath, d.Hash, PackagePath, sha256String(data))
		}
	}
	var dp dataPackage
	if err := json.Unmarshal(data, &dp); err != nil {
		r.addf("%s: not JSON: %v", PackagePath, err)
		return nil, false
	}
	if dp.Profile != "data-package" {
		r.addf("%s: profile is %q, want \"data-package\"", PackagePath, dp.Profile)
	}
	if dp.WACZVersion == "" {
		r.addf("%s: no wacz_version", PackagePath)
	}
	return &dp, true
}

// readEntry reads a small entry whole.
func readEntry(entries map[string]*zip.File, name string) ([]byte, error) {
	zf := entries[name]
	if zf == nil {
		return nil, errors.New("missing")
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxManifest+1))
	if err == nil && len(data) > maxManifest {
		err = fmt.Errorf("larger than %d bytes", maxManifest)
	}
	return data, err
}

// checkResources recomputes each listed resource's hash and size and
// returns the paths listed.
func (r *Report) checkResources(resources []Resource, entries map[string]*zip.File) map[string]bool {
	listed := map[string]bool{}
	for _, res := range resources {
		switch {
		case res.Path == "":
			r.addf("%s: a resource without a path (name %q)", PackagePath, res.Name)
			continue
		case listed[res.Path]:
			r.addf("%s: listed twice in %s", res.Path, PackagePath)
			continue
		}
		listed[res.Path] = true
		zf := entries[res.Path]
		if zf == nil {
			r.addf("%s: listed in %s but not in the ZIP", res.Path, PackagePath)
			continue
		}
		if strings.HasPrefix(res.Path, archivePrefix) && zf.Method != zip.Store {
			r.addf("%s: compressed in the ZIP (method %d); WARC files must be stored as they are", res.Path, zf.Method)
		}
		r.checkResource(res, zf)
	}
	return listed
}

// checkResource streams one entry through sha256.
func (r *Report) checkResource(res Resource, zf *zip.File) {
	r.Checked++
	h := sha256.New()
	var n int64
	rc, err := zf.Open()
	if err == nil {
		n, err = io.Copy(h, rc)
		rc.Close()
	}
	if err != nil {
		r.addf("%s: unreadable after %d bytes: %v", res.Path, n, err)
	}
	if got := hashString(h); got != res.Hash {
		r.addf("%s: hash %s, but %s says %s", res.Path, got, PackagePath, res.Hash)
	}
	if n != res.Bytes {
		r.addf("%s: %d bytes, but %s says %d", res.Path, n, PackagePath, res.Bytes)
	}
}

// checkLayout asks for what every WACZ holds: WARC files, an index and
// the pages.
func (r *Report) checkLayout(listed map[string]bool) {
	var warcs, indexes int
	for path := range listed {
		switch {
		case strings.HasPrefix(path, archivePrefix):
			warcs++
		case strings.HasPrefix(path, "indexes/"):
			indexes++
		}
	}
	if warcs == 0 {
		r.addf("archive/: no WARC file listed")
	}
	if indexes == 0 {
		r.addf("indexes/: no index listed")
	}
	if !listed[PagesPath] {
		r.addf("%s: not listed", PagesPath)
	}
}
