package warc

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/nlnwa/gowarc/v3"
)

// Report is what Check found in a directory of WARC files.
type Report struct {
	Files   int
	Records map[string]int // by WARC-Type
	// Responses maps each WARC-Target-URI to the number of response and
	// revisit records that hold it.
	Responses map[string]int
	// Redirects maps each WARC-Target-URI of a response or revisit record
	// whose HTTP status is 3xx to where each such record's Location
	// points, resolved against the URI: verify follows robots.txt
	// redirects through them.
	Redirects map[string][]string
	// Unfinished are .open files: a crawl is writing them, or one crashed
	// and has not been resumed.
	Unfinished []string
	// Problems are findings that make the archive wrong: unreadable
	// records, digest mismatches, unpaired records, each naming its file
	// and offset.
	Problems []string
}

// OK reports whether the archive is complete and correct.
func (r *Report) OK() bool { return len(r.Problems) == 0 && len(r.Unfinished) == 0 }

// checkOptions read strictly but report every finding rather than stop
// at the first: a finding is a problem all the same.
var checkOptions = []gowarc.WarcRecordOption{
	gowarc.WithSyntaxErrorPolicy(gowarc.ErrWarn),
	gowarc.WithSpecViolationPolicy(gowarc.ErrWarn),
	gowarc.WithUnknownRecordTypePolicy(gowarc.ErrWarn),
	gowarc.WithBlockErrorPolicy(gowarc.ErrWarn),
}

var checking sync.Mutex

// Check reads every WARC file in dir: each record parsed, its block and
// payload digests recomputed (a response's payload de-chunked, as the
// writer digests it: see payload.go), and every request paired with its
// response (or revisit) through WARC-Concurrent-To.
func Check(dir string) (*Report, error) {
	// gowarc's readers write a global of the uuid package as they are made:
	// two Checks at once (verify beside a test's own check) would race.
	checking.Lock()
	defer checking.Unlock()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("warc-check: %w", err)
	}
	rep := &Report{Records: map[string]int{}, Responses: map[string]int{}, Redirects: map[string][]string{}}
	for _, de := range entries {
		name := de.Name()
		switch {
		case de.IsDir():
		case strings.HasSuffix(name, openSuffix):
			rep.Unfinished = append(rep.Unfinished, name)
		case strings.HasSuffix(name, ".warc.gz") || strings.HasSuffix(name, ".warc"):
			rep.Files++
			if err := rep.checkFile(filepath.Join(dir, name)); err != nil {
				return nil, err
			}
		}
	}
	return rep, nil
}

// exchangeRecord is what pairing needs of one request, response or revisit.
type exchangeRecord struct {
	where      string
	typ        gowarc.RecordType
	concurrent []string
}

func (rep *Report) checkFile(path string) error {
	if strings.HasSuffix(path, ".gz") {
		if err := checkGzip(path); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %v", filepath.Base(path), err))
		}
	}
	r, err := gowarc.NewWarcFileReader(path, 0, checkOptions...)
	if err != nil {
		return fmt.Errorf("warc-check: %w", err)
	}
	defer r.Close()
	base := filepath.Base(path)
	byID := map[string]*exchangeRecord{}
	var order []string
	for first := true; ; first = false {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		where := fmt.Sprintf("%s at offset %d", base, rec.Offset)
		if err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: unreadable record: %v", where, err))
			break // the rest of the file cannot be found
		}
		wr := rec.WarcRecord
		findings := rec.Validation
		if v, err := wr.ValidateDigest(); err != nil {
			findings = append(findings, err)
		} else {
			findings = append(findings, v...)
		}
		if ours, ok := checkPayload(wr); ok {
			// gowarc's payload digest covers the body as it is in the
			// block, chunk framing included: ours replaces its verdict.
			findings = slices.DeleteFunc(findings, isPayloadDigestFinding)
			if ours != nil {
				findings = append(findings, ours)
			}
		}
		for _, f := range findings {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s (%s %s): %v", where, wr.Type(),
				wr.WarcHeader().Get(gowarc.WarcTargetURI), f))
		}
		typ := wr.Type()
		rep.Records[typ.String()]++
		if first && typ != gowarc.Warcinfo {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: the first record is a %s, not warcinfo", where, typ))
		}
		switch typ {
		case gowarc.Response, gowarc.Revisit:
			uri := wr.WarcHeader().Get(gowarc.WarcTargetURI)
			rep.Responses[uri]++
			if target, ok := redirectTarget(uri, wr.Block()); ok {
				rep.Redirects[uri] = append(rep.Redirects[uri], target)
			}
			fallthrough
		case gowarc.Request:
			id := wr.WarcHeader().GetId(gowarc.WarcRecordID)
			byID[id] = &exchangeRecord{where: where, typ: typ, concurrent: idsOf(wr.WarcHeader().GetAll(gowarc.WarcConcurrentTo))}
			order = append(order, id)
		}
		rec.Close()
	}
	for _, id := range order {
		x := byID[id]
		if !slices.ContainsFunc(x.concurrent, func(other string) bool { return pairs(x.typ, byID[other]) }) {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %s record %s has no %s paired with it", x.where, x.typ, id, partner(x.typ)))
		}
	}
	return nil
}

// redirectTarget is where the HTTP response in block, archived for uri,
// redirects: its Location resolved against uri, when its status is 3xx.
// A revisit's block holds the response's header as well.
func redirectTarget(uri string, block gowarc.Block) (string, bool) {
	hb, ok := block.(gowarc.ProtocolHeaderBlock)
	if !ok {
		return "", false
	}
	head := hb.ProtocolHeaderBytes()
	if !bytes.HasSuffix(head, []byte("\r\n\r\n")) { // the blank line that ends it may be left off
		head = append(bytes.Clone(head), "\r\n"...)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(head)), nil)
	if err != nil || resp.StatusCode < 300 || resp.StatusCode > 399 {
		return "", false
	}
	loc := resp.Header.Get("Location")
	base, err := url.Parse(uri)
	if loc == "" || err != nil {
		return "", false
	}
	ref, err := url.Parse(loc)
	if err != nil {
		return "", false
	}
	next := base.ResolveReference(ref)
	next.Fragment, next.RawFragment = "", ""
	return next.String(), true
}

// pairs reports whether other is the partner of a record of type typ.
func pairs(typ gowarc.RecordType, other *exchangeRecord) bool {
	if other == nil {
		return false
	}
	if typ == gowarc.Request {
		return other.typ == gowarc.Response || other.typ == gowarc.Revisit
	}
	return other.typ == gowarc.Request
}

func partner(typ gowarc.RecordType) string {
	if typ == gowarc.Request {
		return "response"
	}
	return "request"
}

func idsOf(values []string) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = strings.TrimSuffix(strings.TrimPrefix(v, "<"), ">")
	}
	return out
}

// checkGzip reads every gzip member of path to its end: the record reader
// stops at a record's length and would not see a damaged member trailer
// (its CRC-32 and size).
func checkGzip(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<16))
	if err != nil {
		return fmt.Errorf("gzip: %w", err)
	}
	if _, err := io.Copy(io.Discard, zr); err != nil {
		return fmt.Errorf("gzip members do not check out: %w", err)
	}
	return nil
}

// isPayloadDigestFinding reports whether err is gowarc's finding that a
// payload digest does not match.
func isPayloadDigestFinding(err error) bool {
	var de *gowarc.DigestError
	return errors.As(err, &de) && strings.HasPrefix(err.Error(), "payload:")
}

// checkPayload recomputes the payload digest of a response record as the
// writer computes it (payload.go): over the body de-chunked, still
// content-encoded. ok is false when it cannot (not an HTTP response, no
// payload digest, or a digest other than sha1), and gowarc's verdict
// stands; otherwise problem is what is wrong, nil if nothing. A digest
// over the body with its chunk framing, as the writer once wrote it and
// gowarc computes it, is named as such.
func checkPayload(wr gowarc.WarcRecord) (problem error, ok bool) {
	recorded := wr.WarcHeader().Get(gowarc.WarcPayloadDigest)
	if wr.Type() != gowarc.Response || recorded == "" {
		return nil, false
	}
	block, isHTTP := wr.Block().(gowarc.HttpResponseBlock)
	algorithm, _, _ := strings.Cut(recorded, ":")
	if !isHTTP || !strings.EqualFold(algorithm, "sha1") {
		return nil, false
	}
	raw, err := block.RawBytes()
	if err != nil {
		return fmt.Errorf("payload: read the block again: %w", err), true
	}
	h := sha1.New()
	chunked, err := payloadOf(h, raw)
	if err != nil {
		return fmt.Errorf("payload: read the block again: %w", err), true
	}
	sum := h.Sum(nil)
	if digestIs(recorded, sum) {
		return nil, true
	}
	ours := digestText(h)
	if chunked {
		framed, err := block.PayloadBytes() // the body as the block has it
		if err == nil {
			fh := sha1.New()
			if _, err := io.Copy(fh, framed); err == nil && digestIs(recorded, fh.Sum(nil)) {
				return fmt.Errorf("payload digest %s covers the chunk framing (the transfer coding), "+
					"not the body: the de-chunked body's is %s", recorded, ours), true
			}
		}
		return fmt.Errorf("payload digest %s does not match the de-chunked body's %s", recorded, ours), true
	}
	return fmt.Errorf("payload digest %s does not match the body's %s", recorded, ours), true
}

// digestIs reports whether a digest field ("sha1:" and the sum in base32,
// as the writer has it, or in hex) holds sum.
func digestIs(field string, sum []byte) bool {
	_, value, _ := strings.Cut(field, ":")
	value = strings.TrimSpace(value)
	if len(value) == 2*len(sum) {
		if b, err := hex.DecodeString(value); err == nil {
			return bytes.Equal(b, sum)
		}
	}
	b, err := base32.StdEncoding.DecodeString(strings.ToUpper(value))
	return err == nil && bytes.Equal(b, sum)
}
