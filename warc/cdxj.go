package warc

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A CDXJ line, as pywb, cdxj-indexer and warcio.js write them:
//
//	SURT TIMESTAMP14 {"url":...,"mime":...,"status":"200","digest":"sha1:...","length":"N","offset":"N","filename":"NAME.warc.gz"}
//
// one for each response and revisit record, its offset and length those
// of the record's gzip member in the file. The fields are strings; mime
// is the HTTP Content-Type without parameters ("warc/revisit" for a
// revisit), status the HTTP status, digest the WARC-Payload-Digest; a
// field with no value is left out. The lines of an index are sorted
// bytewise: pywb and the ZipNum lookups of wabac.js binary-search them.
//
// The writer makes each line from what it wrote (cdxjHead on a worker,
// appendCDXJ once the place is known), and an archive made before is
// indexed by reading the same fields back (index.go): both give the same
// bytes for the same record.

// httpHeadCap is how much of a record's block is read for the HTTP
// status and Content-Type.
const httpHeadCap = 64 << 10

// cdxjHead is a record's CDXJ line up to its place in the archive: the
// key, the timestamp and the fields before "length". date is the record's
// WARC-Date as written, head the start of its block (an HTTP message's
// head) or nil.
func cdxjHead(uri, date string, revisit bool, head []byte, digest string) []byte {
	status, mime := httpHeadFields(head)
	if revisit {
		mime = "warc/revisit"
	}
	b := make([]byte, 0, 2*len(uri)+len(digest)+64)
	b = append(b, SURT(uri)...)
	b = append(b, ' ')
	b = append(b, timestamp14(date)...)
	b = append(b, ` {"url":`...)
	b = appendJSONString(b, uri)
	if mime != "" {
		b = append(b, `,"mime":`...)
		b = appendJSONString(b, mime)
	}
	if status != "" {
		b = append(b, `,"status":"`...)
		b = append(b, status...)
		b = append(b, '"')
	}
	if digest != "" {
		b = append(b, `,"digest":`...)
		b = appendJSONString(b, digest)
	}
	return b
}

// appendCDXJ appends to dst the line of head (from cdxjHead) for a record
// at offset in the file whose name, as a JSON string, is filename.
func appendCDXJ(dst, head []byte, offset, length int64, filename string) []byte {
	dst = append(dst, head...)
	dst = append(dst, `,"length":"`...)
	dst = strconv.AppendInt(dst, length, 10)
	dst = append(dst, `","offset":"`...)
	dst = strconv.AppendInt(dst, offset, 10)
	dst = append(dst, `","filename":`...)
	dst = append(dst, filename...)
	return append(dst, "}\n"...)
}

// timestamp14 is a WARC-Date's first 14 digits, YYYYMMDDhhmmss.
func timestamp14(date string) string {
	b := make([]byte, 0, 14)
	for i := 0; i < len(date) && len(b) < 14; i++ {
		if c := date[i]; c >= '0' && c <= '9' {
			b = append(b, c)
		}
	}
	return string(b)
}

// httpHeadFields reads the status and the media type (the Content-Type
// without parameters) of the HTTP response whose head starts msg. The
// head ends where httpHeaderEnd says it does, at the first line shorter
// than three bytes, so that the part of a block read past it changes
// nothing.
func httpHeadFields(msg []byte) (status, mime string) {
	for first := true; len(msg) > 0; first = false {
		line := msg
		if i := bytes.IndexByte(msg, '\n'); i >= 0 {
			line, msg = msg[:i+1], msg[i+1:]
		} else {
			msg = nil
		}
		if len(line) < 3 {
			return status, mime
		}
		line = bytes.TrimRight(line, "\r\n")
		if first {
			status = statusOf(string(line))
			continue
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if ok && mime == "" && strings.EqualFold(string(bytes.TrimSpace(name)), "Content-Type") {
			m, _, _ := bytes.Cut(value, []byte(";"))
			mime = string(bytes.TrimSpace(m))
		}
	}
	return status, mime
}

// statusOf is the status code of an HTTP status line, "" if it has none.
func statusOf(line string) string {
	_, rest, ok := strings.Cut(line, " ")
	if !ok || !strings.HasPrefix(line, "HTTP/") {
		return ""
	}
	code, _, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
	if len(code) != 3 || strings.Trim(code, "0123456789") != "" {
		return ""
	}
	return code
}

// appendJSONString appends s as a JSON string.
func appendJSONString(dst []byte, s string) []byte {
	plain := utf8.ValidString(s)
	for i := 0; plain && i < len(s); i++ {
		plain = s[i] >= ' ' && s[i] != '"' && s[i] != '\\'
	}
	if plain {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	quoted, _ := json.Marshal(s) // a string always marshals
	return append(dst, quoted...)
}
