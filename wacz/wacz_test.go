package wacz

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var created = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// fixture is a directory of fake WARC files (the package never reads
// their records) and the source that packages them.
type fixture struct {
	dir   string
	warcs map[string][]byte // by base name
	src   Source
}

func newFixture(t *testing.T, sizes ...int) *fixture {
	t.Helper()
	fx := &fixture{dir: t.TempDir(), warcs: map[string][]byte{}}
	rng := rand.New(rand.NewPCG(1, 2))
	var index []string
	for i, size := range sizes {
		name := fmt.Sprintf("crawl-%05d.warc.gz", i+1)
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		writeFile(t, filepath.Join(fx.dir, name), data)
		fx.warcs[name] = data
		fx.src.WARCs = append(fx.src.WARCs, filepath.Join(fx.dir, name))
		index = append(index, fmt.Sprintf(`com,example)/page%d 20260304050607 {"url":"http://example.com/page%d","filename":%q,"offset":0,"length":%d}`, i, i, name, size))
	}
	slices.Sort(index)
	fx.src.Index = linesIndex(index...)
	fx.src.Pages = pageList(
		Page{URL: "http://example.com/", Title: "Home", TS: created.Add(-time.Hour), Seed: true},
		Page{URL: "http://example.org/", Title: "Other home", TS: created.Add(-time.Hour), Seed: true},
		Page{URL: "http://example.com/a", Title: "A \"quoted\" <title>", TS: created.Add(-time.Minute)},
	)
	fx.src.Title, fx.src.Software, fx.src.Created = "A crawl", "breakwater/test", created
	return fx
}

func linesIndex(lines ...string) func(io.Writer) error {
	return func(w io.Writer) error {
		for _, l := range lines {
			if _, err := io.WriteString(w, l+"\n"); err != nil {
				return err
			}
		}
		return nil
	}
}

func pageList(pages ...Page) func(func(Page) error) error {
	return func(emit func(Page) error) error {
		for _, p := range pages {
			if err := emit(p); err != nil {
				return err
			}
		}
		return nil
	}
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (fx *fixture) write(t *testing.T) (string, *Summary) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "crawl.wacz")
	sum, err := WriteFile(out, fx.src)
	if err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	return out, sum
}

// unzipped is a WACZ read back with archive/zip, independently of Verify.
type unzipped struct {
	files   map[string]*zip.File
	content map[string][]byte
	order   []string
}

func readZip(t *testing.T, path string) *unzipped {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer zr.Close()
	u := &unzipped{files: map[string]*zip.File{}, content: map[string][]byte{}}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatalf("open entry %s: %v", f.Name, err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("read entry %s: %v", f.Name, err)
		}
		u.files[f.Name], u.content[f.Name] = f, data
		u.order = append(u.order, f.Name)
	}
	return u
}

func hexSHA256(data []byte) string {
	h := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(h[:])
}

// The package holds every WARC file byte for byte, stored; every hash and
// size in datapackage.json is the file's; the digest is datapackage.json's;
// pages.jsonl starts with its header and lists the seeds first.
func TestWriteRoundTrip(t *testing.T) {
	fx := newFixture(t, 300, 200_000)
	path, sum := fx.write(t)
	u := readZip(t, path)

	wantOrder := []string{"archive/crawl-00001.warc.gz", "archive/crawl-00002.warc.gz", IndexPath, PagesPath, PackagePath, DigestPath}
	if !slices.Equal(u.order, wantOrder) {
		t.Errorf("entries %v, want %v", u.order, wantOrder)
	}
	for name, data := range fx.warcs {
		p := "archive/" + name
		if f := u.files[p]; f == nil || f.Method != zip.Store {
			t.Errorf("%s: not stored (method Store) in the zip: %+v", p, f)
		}
		if !bytes.Equal(u.content[p], data) {
			t.Errorf("%s differs from the source file", p)
		}
	}
	for _, p := range []string{IndexPath, PagesPath, PackagePath, DigestPath} {
		if f := u.files[p]; f == nil || f.Method != zip.Deflate {
			t.Errorf("%s: not deflated", p)
		}
	}

	var dp struct {
		Profile, Title, Created, Software, MainPageURL, MainPageDate string
		WACZVersion                                                  string `json:"wacz_version"`
		Resources                                                    []Resource
	}
	decodeStrict(t, u.content[PackagePath], &dp)
	if dp.Profile != "data-package" || dp.WACZVersion != "1.1.1" || dp.Title != "A crawl" ||
		dp.Created != "2026-03-04T05:06:07Z" || dp.Software != "breakwater/test" {
		t.Errorf("datapackage.json: %+v", dp)
	}
	if dp.MainPageURL != "" {
		t.Errorf("two seeds, but mainPageUrl %q", dp.MainPageURL)
	}
	listed := map[string]bool{}
	for _, r := range dp.Resources {
		listed[r.Path] = true
		data, ok := u.content[r.Path]
		if !ok {
			t.Errorf("%s listed but not in the zip", r.Path)
			continue
		}
		if r.Hash != hexSHA256(data) || r.Bytes != int64(len(data)) {
			t.Errorf("%s: listed %s %d bytes, is %s %d bytes", r.Path, r.Hash, r.Bytes, hexSHA256(data), len(data))
		}
		if r.Name != filepath.Base(r.Path) {
			t.Errorf("%s: name %q", r.Path, r.Name)
		}
	}
	for _, p := range wantOrder[:4] {
		if !listed[p] {
			t.Errorf("%s is not listed in datapackage.json", p)
		}
	}
	var digest struct{ Path, Hash string }
	decodeStrict(t, u.content[DigestPath], &digest)
	if digest.Path != "datapackage.json" || digest.Hash != hexSHA256(u.content[PackagePath]) {
		t.Errorf("datapackage-digest.json %+v, datapackage.json hashes to %s", digest, hexSHA256(u.content[PackagePath]))
	}

	lines := strings.Split(strings.TrimSuffix(string(u.content[PagesPath]), "\n"), "\n")
	var header map[string]string
	decodeStrict(t, []byte(lines[0]), &header)
	if header["format"] != "json-pages-1.0" || header["id"] != "pages" || header["title"] != "All Pages" {
		t.Errorf("pages.jsonl header %q", lines[0])
	}
	var urls []string
	ids := map[string]bool{}
	for _, l := range lines[1:] {
		var p struct{ ID, URL, Title, TS string }
		decodeStrict(t, []byte(l), &p)
		if _, err := time.Parse(time.RFC3339, p.TS); err != nil || p.ID == "" || ids[p.ID] {
			t.Errorf("page line %s: bad ts or id", l)
		}
		ids[p.ID] = true
		urls = append(urls, p.URL)
	}
	if want := []string{"http://example.com/", "http://example.org/", "http://example.com/a"}; !slices.Equal(urls, want) {
		t.Errorf("pages %v, want %v", urls, want)
	}
	if !strings.Contains(string(u.content[PagesPath]), `"title":"A \"quoted\" <title>"`) {
		t.Errorf("a title is not kept as it is:\n%s", u.content[PagesPath])
	}
	if sum.WARCs != 2 || sum.Pages != 3 || sum.Seeds != 2 || sum.IndexLines != 2 || sum.IndexLeftOut != 0 {
		t.Errorf("summary %+v", sum)
	}
	rep, err := Verify(path)
	if err != nil || !rep.OK() || rep.Checked != 4 {
		t.Errorf("Verify: %+v, %v", rep, err)
	}
}

// decodeStrict decodes JSON into v, refusing fields v does not have.
func decodeStrict(t *testing.T, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
}

// The same source packaged twice is the same bytes: ids and times come
// from the source.
func TestWriteIsDeterministic(t *testing.T) {
	fx := newFixture(t, 1000)
	var a, b bytes.Buffer
	if _, err := Write(&a, fx.src); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(&b, fx.src); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two packages of one source differ")
	}
}

// With one seed, datapackage.json names it the main page, which a replay
// tool opens first.
func TestOneSeedIsTheMainPage(t *testing.T) {
	fx := newFixture(t, 100)
	fx.src.Pages = pageList(Page{URL: "http://example.com/", TS: created, Seed: true}, Page{URL: "http://example.com/b", TS: created})
	path, _ := fx.write(t)
	var dp dataPackage
	decodeStrict(t, readZip(t, path).content[PackagePath], &dp)
	if dp.MainPageURL != "http://example.com/" || dp.MainPageDate != "2026-03-04T05:06:07.000Z" {
		t.Errorf("main page %q at %q", dp.MainPageURL, dp.MainPageDate)
	}
}

// An index line naming a file not in the package is left out, so that no
// lookup leads to a file the replay tool cannot find.
func TestIndexLinesOfOtherFilesAreLeftOut(t *testing.T) {
	fx := newFixture(t, 100)
	fx.src.Index = linesIndex(
		`com,example)/ 20260304050607 {"url":"http://example.com/","filename":"crawl-00001.warc.gz"}`,
		`com,example)/b 20260304050607 {"url":"http://example.com/b","filename":"crawl-00002.warc.gz"}`,
		`com,example)/c 20260304050607 {"url":"http://example.com/c","filename":"crawl-00001.warc.gz"}`,
	)
	path, sum := fx.write(t)
	got := string(readZip(t, path).content[IndexPath])
	want := `com,example)/ 20260304050607 {"url":"http://example.com/","filename":"crawl-00001.warc.gz"}` + "\n" +
		`com,example)/c 20260304050607 {"url":"http://example.com/c","filename":"crawl-00001.warc.gz"}` + "\n"
	if got != want || sum.IndexLines != 2 || sum.IndexLeftOut != 1 {
		t.Errorf("index %q (summary %+v), want %q", got, sum, want)
	}
}

// What Write refuses: each leaves no file at the path asked for, and no
// temporary file beside it.
func TestWriteRefuses(t *testing.T) {
	indexErr := errors.New("the index is unreadable")
	cases := []struct {
		name   string
		change func(fx *fixture)
		want   string
	}{
		{"no WARC file", func(fx *fixture) { fx.src.WARCs = nil }, "no finished WARC file"},
		{"no index", func(fx *fixture) { fx.src.Index = nil }, "no index"},
		{"a missing WARC file", func(fx *fixture) { fx.src.WARCs = append(fx.src.WARCs, filepath.Join(fx.dir, "gone.warc.gz")) }, "gone.warc.gz"},
		{"two WARC files of one name", func(fx *fixture) { fx.src.WARCs = append(fx.src.WARCs, fx.src.WARCs[0]) }, "two WARC files named"},
		{"an unsorted index", func(fx *fixture) {
			fx.src.Index = linesIndex(`com,example)/b 2026 {"filename":"crawl-00001.warc.gz"}`, `com,example)/a 2026 {"filename":"crawl-00001.warc.gz"}`)
		}, "line 2 is out of order"},
		{"an index line without JSON", func(fx *fixture) { fx.src.Index = linesIndex(`com,example)/ 2026`) }, "line 1: no JSON block"},
		{"an index line without a filename", func(fx *fixture) { fx.src.Index = linesIndex(`com,example)/ 2026 {"url":"x"}`) }, "line 1: no filename"},
		{"an index that fails", func(fx *fixture) {
			fx.src.Index = func(w io.Writer) error {
				io.WriteString(w, "com,example)/ 2026 {\"filename\":\"crawl-00001.warc.gz\"}\n")
				return indexErr
			}
		}, indexErr.Error()},
		{"a seed after a page", func(fx *fixture) {
			fx.src.Pages = pageList(Page{URL: "http://a/", Seed: true}, Page{URL: "http://a/x"}, Page{URL: "http://b/", Seed: true})
		}, "seed http://b/ comes after a page that is not a seed"},
		{"a page without a URL", func(fx *fixture) { fx.src.Pages = pageList(Page{Title: "?"}) }, "a page without a URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t, 100)
			tc.change(fx)
			outDir := t.TempDir()
			_, err := WriteFile(filepath.Join(outDir, "crawl.wacz"), fx.src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("WriteFile: %v, want an error saying %q", err, tc.want)
			}
			if left, _ := os.ReadDir(outDir); len(left) != 0 {
				t.Errorf("a refused package left %v", left)
			}
		})
	}
}

// Any byte of a WARC file changed in the package is found, and named; so
// is a changed byte of each text file, and of datapackage.json itself.
func TestVerifyFindsAChangedByte(t *testing.T) {
	fx := newFixture(t, 64, 5000)
	path, _ := fx.write(t)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(good), int64(len(good)))
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.wacz")
	for _, f := range zr.File {
		start, err := f.DataOffset()
		if err != nil {
			t.Fatal(err)
		}
		size := int64(f.CompressedSize64)
		offsets := []int64{0, size / 2, size - 1}
		if f.Method == zip.Store && size < 100 {
			offsets = offsets[:0]
			for i := range size {
				offsets = append(offsets, i) // every byte of a small WARC file
			}
		}
		for _, off := range offsets {
			data := slices.Clone(good)
			data[start+off] ^= 0xff
			writeFile(t, bad, data)
			rep, err := Verify(bad)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if !mentions(rep.Problems, f.Name) {
				t.Errorf("byte %d of %s changed: problems %q do not name it", off, f.Name, rep.Problems)
			}
		}
	}
}

func mentions(problems []string, name string) bool {
	return slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, name+":") })
}

// Verify names what is wrong in packages that Write would not make.
func TestVerifyReportsByName(t *testing.T) {
	warc := bytes.Repeat([]byte("WARC/1.1\r\n"), 10)
	type entry struct {
		name   string
		method uint16
		data   []byte
	}
	build := func(t *testing.T, entries []entry, resources []Resource, digestHash string) string {
		t.Helper()
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		add := func(e entry) {
			w, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: e.method})
			if err != nil {
				t.Fatal(err)
			}
			w.Write(e.data)
		}
		for _, e := range entries {
			add(e)
		}
		dp, _ := json.Marshal(dataPackage{Profile: "data-package", WACZVersion: "1.1.1", Resources: resources})
		add(entry{PackagePath, zip.Deflate, dp})
		if digestHash == "" {
			digestHash = hexSHA256(dp)
		}
		dg, _ := json.Marshal(packageDigest{Path: PackagePath, Hash: digestHash})
		add(entry{DigestPath, zip.Deflate, dg})
		zw.Close()
		path := filepath.Join(t.TempDir(), "x.wacz")
		writeFile(t, path, buf.Bytes())
		return path
	}
	res := func(path string, data []byte) Resource {
		return Resource{Name: filepath.Base(path), Path: path, Hash: hexSHA256(data), Bytes: int64(len(data))}
	}
	pages := []byte(pagesHeader + "\n")
	index := []byte("com,example)/ 2026 {}\n")
	full := []entry{{"archive/a.warc.gz", zip.Store, warc}, {IndexPath, zip.Deflate, index}, {PagesPath, zip.Deflate, pages}}
	fullRes := []Resource{res("archive/a.warc.gz", warc), res(IndexPath, index), res(PagesPath, pages)}

	cases := []struct {
		name      string
		entries   []entry
		resources []Resource
		digest    string
		want      string
	}{
		{"whole", full, fullRes, "", ""},
		{"a WARC file deflated", []entry{{"archive/a.warc.gz", zip.Deflate, warc}, full[1], full[2]}, fullRes, "",
			"archive/a.warc.gz: compressed in the ZIP"},
		{"a file not listed", append(slices.Clone(full), entry{"extra.txt", zip.Deflate, []byte("x")}), fullRes, "",
			"extra.txt: in the ZIP but not listed"},
		{"a file listed but missing", full[:2], fullRes, "", PagesPath + ": listed in datapackage.json but not in the ZIP"},
		{"a size that differs", full, []Resource{fullRes[0], fullRes[1], {Name: "pages.jsonl", Path: PagesPath, Hash: fullRes[2].Hash, Bytes: 3}}, "",
			PagesPath + ": " + fmt.Sprint(len(pages)) + " bytes, but datapackage.json says 3"},
		{"a digest that differs", full, fullRes, "sha256:00", "datapackage-digest.json: hash sha256:00, but datapackage.json hashes to"},
		{"no WARC file, index or pages", nil, nil, "", "archive/: no WARC file listed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Verify(build(t, tc.entries, tc.resources, tc.digest))
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if !rep.OK() {
					t.Errorf("problems %q in a whole package", rep.Problems)
				}
				return
			}
			if !slices.ContainsFunc(rep.Problems, func(p string) bool { return strings.HasPrefix(p, tc.want) }) {
				t.Errorf("problems %q, want one starting %q", rep.Problems, tc.want)
			}
		})
	}

	notZip := filepath.Join(t.TempDir(), "not.wacz")
	writeFile(t, notZip, []byte("not a zip"))
	if rep, err := Verify(notZip); err != nil || !mentions(rep.Problems, notZip) {
		t.Errorf("a file that is no zip: %+v, %v", rep, err)
	}
	if _, err := Verify(filepath.Join(t.TempDir(), "missing.wacz")); err == nil {
		t.Error("Verify of a missing file: no error")
	}
}

// Files still being written (.open) are listed apart, and the earliest
// one's start bounds the pages a package can hold; anything not a WARC
// file is not listed.
func TestListWARCs(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b.warc.gz", "a.warc", "index.cdxj", "notes.txt", "e.warc.gz.open"} {
		writeFile(t, filepath.Join(dir, name), []byte("x"))
	}
	os.Mkdir(filepath.Join(dir, "d.warc.gz"), 0o755)
	started := created.Add(-time.Hour).Add(123456789 * time.Nanosecond)
	for name, at := range map[string]time.Time{"c.warc.gz.open": started, "f.warc.gz.open": created} {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		fmt.Fprintf(zw, "WARC/1.1\r\nWARC-Type: warcinfo\r\nWARC-Date: %s\r\nContent-Length: 0\r\n\r\n\r\n\r\n", at.Format(time.RFC3339Nano))
		zw.Close()
		buf.WriteString("the next record, still being written")
		writeFile(t, filepath.Join(dir, name), buf.Bytes())
	}
	got, err := ListWARCs(dir)
	if err != nil {
		t.Fatal(err)
	}
	paths := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, filepath.Join(dir, n))
		}
		return out
	}
	if want := paths("a.warc", "b.warc.gz"); !slices.Equal(got.Finished, want) {
		t.Errorf("finished %v, want %v", got.Finished, want)
	}
	if want := paths("c.warc.gz.open", "e.warc.gz.open", "f.warc.gz.open"); !slices.Equal(got.Unfinished, want) {
		t.Errorf("unfinished %v, want %v", got.Unfinished, want)
	}
	if !got.UnfinishedSince.Equal(started) {
		t.Errorf("unfinished since %v, want %v (e.warc.gz.open has no record yet)", got.UnfinishedSince, started)
	}
}

// A WARC file is copied through, never held: packaging a 32 MiB file
// allocates a small fraction of it.
func TestWriteStreams(t *testing.T) {
	fx := newFixture(t, 10)
	big := filepath.Join(fx.dir, "big.warc.gz")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 32<<20); err != nil {
		t.Fatal(err)
	}
	fx.src.WARCs = append(fx.src.WARCs, big)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	sum, err := Write(io.Discard, fx.src)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Errorf("packaging a 32 MiB file allocated %d bytes", got)
	}
	if sum.Resources[1].Bytes != 32<<20 {
		t.Errorf("resources %+v", sum.Resources)
	}
}

// resourceName keeps names within the Data Package profile's alphabet.
func TestResourceName(t *testing.T) {
	for in, want := range map[string]string{
		"archive/breakwater-20260304050607-00001-Host_1.warc.gz": "breakwater-20260304050607-00001-host_1.warc.gz",
		"pages/pages.jsonl":  "pages.jsonl",
		"archive/a b+c.warc": "a-b-c.warc",
	} {
		if got := resourceName(in); got != want {
			t.Errorf("resourceName(%q) = %q, want %q", in, got, want)
		}
	}
}
