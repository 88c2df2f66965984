package wacz

import (
	"archive/zip"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Version is the WACZ version written.
const Version = "1.1.1"

// The paths of the package's own files.
const (
	IndexPath     = "indexes/index.cdxj"
	PagesPath     = "pages/pages.jsonl"
	PackagePath   = "datapackage.json"
	DigestPath    = "datapackage-digest.json"
	archivePrefix = "archive/"
)

// Page is one entry of pages/pages.jsonl: a page a replay tool lists.
type Page struct {
	URL   string
	Title string
	TS    time.Time // when it was fetched
	// Seed marks a page the crawl started from; seeds come first.
	Seed bool
}

// Source is what Write packages.
type Source struct {
	// WARCs are the paths of the WARC files, finished ones only
	// (ListWARCs lists a directory's); they are packaged under their
	// base names, which must differ.
	WARCs []string
	// Index streams the CDXJ index of the WARC files, sorted bytewise.
	Index func(w io.Writer) error
	// Pages calls emit with each page, seeds first; emit's error stops it
	// and is returned. Nil means no pages.
	Pages func(emit func(Page) error) error
	// Title names the collection in datapackage.json ("" leaves it out).
	Title string
	// Software names the writer, e.g. "breakwater/1.4".
	Software string
	// Created is when the package is made: datapackage.json's created and
	// every ZIP entry's modification time.
	Created time.Time
}

// Resource is one file of the package as datapackage.json lists it.
type Resource struct {
	Name  string `json:"name"`
	Path  string `json:"path"`
	Hash  string `json:"hash"` // "sha256:" and the hex digest
	Bytes int64  `json:"bytes"`
}

// Summary is what Write packaged.
type Summary struct {
	WARCs      int
	IndexLines int
	// IndexLeftOut counts the index lines that named a file not packaged.
	IndexLeftOut int
	Pages, Seeds int
	Resources    []Resource
}

// dataPackage is datapackage.json.
type dataPackage struct {
	Profile      string     `json:"profile"`
	WACZVersion  string     `json:"wacz_version"`
	Title        string     `json:"title,omitempty"`
	Created      string     `json:"created"`
	Software     string     `json:"software,omitempty"`
	MainPageURL  string     `json:"mainPageUrl,omitempty"`
	MainPageDate string     `json:"mainPageDate,omitempty"`
	Resources    []Resource `json:"resources"`
}

// packageDigest is datapackage-digest.json.
type packageDigest struct {
	Path string `json:"path"`
	Hash string `json:"hash"`
}

// pagesHeader is the first line of pages.jsonl.
const pagesHeader = `{"format":"json-pages-1.0","id":"pages","title":"All Pages"}`

// WriteFile writes the package to path, through a temporary file beside
// it that is renamed to path once complete and synced.
func WriteFile(path string, src Source) (*Summary, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("wacz %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	sum, err := Write(tmp, src)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return nil, fmt.Errorf("wacz %s: %w", path, err)
	}
	return sum, nil
}

// Write writes the package to w.
func Write(w io.Writer, src Source) (*Summary, error) {
	if len(src.WARCs) == 0 {
		return nil, errors.New("no finished WARC file to package")
	}
	if src.Index == nil {
		return nil, errors.New("no index to package")
	}
	p := &packer{zw: zip.NewWriter(w), created: src.Created.UTC()}
	sum := &Summary{}
	names := map[string]bool{}
	for _, path := range src.WARCs {
		name := filepath.Base(path)
		if names[name] {
			return nil, fmt.Errorf("two WARC files named %s", name)
		}
		names[name] = true
		if err := p.addFile(archivePrefix+name, path); err != nil {
			return nil, err
		}
		sum.WARCs++
	}
	err := p.add(IndexPath, zip.Deflate, func(w io.Writer) error { return copyIndex(w, src.Index, names, sum) })
	if err != nil {
		return nil, err
	}
	var mainPage *Page
	err = p.add(PagesPath, zip.Deflate, func(w io.Writer) error { return writePages(w, src.Pages, sum, &mainPage) })
	if err != nil {
		return nil, err
	}
	dp := dataPackage{Profile: "data-package", WACZVersion: Version, Title: src.Title,
		Created: p.created.Format(time.RFC3339), Software: src.Software, Resources: p.resources}
	if mainPage != nil && sum.Seeds == 1 {
		dp.MainPageURL, dp.MainPageDate = mainPage.URL, pageTS(mainPage.TS)
	}
	sum.Resources = p.resources
	if err := p.finish(dp); err != nil {
		return nil, err
	}
	return sum, nil
}

// packer writes the ZIP's entries and keeps the resources they make.
type packer struct {
	zw        *zip.Writer
	created   time.Time
	resources []Resource
}

// add writes one entry whose content fill streams, hashing and counting
// it on the way, and lists it as a resource.
func (p *packer) add(path string, method uint16, fill func(w io.Writer) error) error {
	entry, err := p.zw.CreateHeader(&zip.FileHeader{Name: path, Method: method, Modified: p.created})
	if err != nil {
		return fmt.Errorf("wacz entry %s: %w", path, err)
	}
	h := sha256.New()
	n := &countingWriter{}
	if err := fill(io.MultiWriter(entry, h, n)); err != nil {
		return fmt.Errorf("wacz entry %s: %w", path, err)
	}
	p.resources = append(p.resources, Resource{Name: resourceName(path), Path: path, Hash: hashString(h), Bytes: n.n})
	return nil
}

// addFile copies the file at src into the entry path, stored as is.
func (p *packer) addFile(path, src string) error {
	return p.add(path, zip.Store, func(w io.Writer) error {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	})
}

// finish writes datapackage.json, its digest and the ZIP's directory.
func (p *packer) finish(dp dataPackage) error {
	data, err := json.MarshalIndent(dp, "", "  ")
	if err != nil {
		return fmt.Errorf("datapackage.json: %w", err)
	}
	if err := p.addBytes(PackagePath, data); err != nil {
		return err
	}
	digest, err := json.MarshalIndent(packageDigest{Path: PackagePath, Hash: sha256String(data)}, "", "  ")
	if err != nil {
		return fmt.Errorf("datapackage-digest.json: %w", err)
	}
	if err := p.addBytes(DigestPath, digest); err != nil {
		return err
	}
	if err := p.zw.Close(); err != nil {
		return fmt.Errorf("wacz: finish the zip: %w", err)
	}
	return nil
}

// addBytes writes an entry that datapackage.json does not list (itself
// and its digest).
func (p *packer) addBytes(path string, data []byte) error {
	entry, err := p.zw.CreateHeader(&zip.FileHeader{Name: path, Method: zip.Deflate, Modified: p.created})
	if err == nil {
		_, err = entry.Write(data)
	}
	if err != nil {
		return fmt.Errorf("wacz entry %s: %w", path, err)
	}
	return nil
}

// copyIndex streams the index into w, checking that its lines are sorted
// and leaving out those whose filename is not packaged.
func copyIndex(w io.Writer, index func(io.Writer) error, files map[string]bool, sum *Summary) error {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(index(pw))
	}()
	defer func() {
		pr.Close() // stops the index's writes if we stop first
		<-done
	}()
	bw := bufio.NewWriterSize(w, 64<<10)
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var prev []byte
	for line := 1; sc.Scan(); line++ {
		text := sc.Bytes()
		if len(text) == 0 {
			continue
		}
		if prev != nil && bytes.Compare(prev, text) > 0 {
			return fmt.Errorf("index line %d is out of order (lines must be sorted bytewise): %.200s", line, text)
		}
		prev = append(prev[:0], text...)
		name, err := indexFilename(text)
		if err != nil {
			return fmt.Errorf("index line %d: %w", line, err)
		}
		if !files[name] {
			sum.IndexLeftOut++
			continue
		}
		sum.IndexLines++
		bw.Write(text)
		if err := bw.WriteByte('\n'); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read the index: %w", err)
	}
	return bw.Flush()
}

// indexFilename is the filename field of a CDXJ line "KEY TIMESTAMP {json}".
func indexFilename(line []byte) (string, error) {
	i := bytes.IndexByte(line, '{')
	if i < 0 {
		return "", fmt.Errorf("no JSON block: %.200s", line)
	}
	var fields struct {
		Filename string `json:"filename"`
	}
	if err := json.Unmarshal(line[i:], &fields); err != nil {
		return "", fmt.Errorf("JSON block: %v: %.200s", err, line)
	}
	if fields.Filename == "" {
		return "", fmt.Errorf("no filename: %.200s", line)
	}
	return fields.Filename, nil
}

// pageLine is one line of pages.jsonl.
type pageLine struct {
	ID    string `json:"id"`
	URL   string `json:"url"`
	Title string `json:"title,omitempty"`
	TS    string `json:"ts"`
}

// writePages writes the header and then each page, keeping the first seed
// in main.
func writePages(w io.Writer, pages func(func(Page) error) error, sum *Summary, main **Page) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString(pagesHeader + "\n")
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	if pages != nil {
		err := pages(func(pg Page) error {
			if pg.URL == "" {
				return errors.New("a page without a URL")
			}
			if pg.Seed && sum.Pages > sum.Seeds {
				return fmt.Errorf("seed %s comes after a page that is not a seed: seeds must come first", pg.URL)
			}
			if pg.Seed && *main == nil {
				*main = &pg
			}
			sum.Pages++
			if pg.Seed {
				sum.Seeds++
			}
			ts := pageTS(pg.TS)
			return enc.Encode(pageLine{ID: pageID(pg.URL, ts), URL: pg.URL, Title: pg.Title, TS: ts})
		})
		if err != nil {
			return fmt.Errorf("pages: %w", err)
		}
	}
	return bw.Flush()
}

// pageTS is a page's time as pages.jsonl has it: RFC 3339 in UTC to the
// millisecond, the form a browser's Date writes and reads.
func pageTS(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// pageID names a page by its URL and time, so the same crawl packaged
// twice has the same ids.
func pageID(url, ts string) string {
	h := sha256.Sum256([]byte(url + " " + ts))
	return hex.EncodeToString(h[:8])
}

// resourceName is a resource's name as the Data Package profile allows
// it: the file's base name, lower case, other characters than
// [-a-z0-9._] made '-'.
func resourceName(path string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', strings.ContainsRune("-._", r):
			return r
		}
		return '-'
	}, filepath.Base(path))
}

func hashString(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

func sha256String(data []byte) string {
	h := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(h[:])
}

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}
