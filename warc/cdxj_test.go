package warc

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestHTTPHeadFields(t *testing.T) {
	for _, c := range []struct{ head, status, mime string }{
		{"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\r\n", "200", "text/html"},
		{"HTTP/1.0 404 Not Found\r\n\r\n", "404", ""},
		{"HTTP/1.1 301\r\ncontent-TYPE:image/png\r\n\r\n<body>", "301", "image/png"},
		{"HTTP/2 204 \nContent-Type:  a/b ;x\n\n", "204", "a/b"},
		{"HTTP/1.1 200 OK\r\nX: y\r\n\r\nContent-Type: text/evil\r\n", "200", ""},           // a body is not a head
		{"HTTP/1.1 200 OK\r\nContent-Type: a/b\r\nContent-Type: c/d\r\n\r\n", "200", "a/b"}, // the first
		{"HTTP/1.1 20x OK\r\n\r\n", "", ""},
		{"HTTP/1.1 2000 OK\r\n\r\n", "", ""},
		{"no status line\r\nContent-Type: text/plain\r\n\r\n", "", "text/plain"},
		{"", "", ""},
		{"HTTP/1.1 200 OK\r\nContent-Type: text/plain", "200", "text/plain"}, // cut short
	} {
		status, mime := httpHeadFields([]byte(c.head))
		if status != c.status || mime != c.mime {
			t.Errorf("httpHeadFields(%q) = %q, %q; want %q, %q", c.head, status, mime, c.status, c.mime)
		}
	}
}

// A line is the key, the timestamp and JSON of strings in pywb's order;
// a value that needs escaping is escaped.
func TestCDXJLine(t *testing.T) {
	head := cdxjHead("http://example.com/a\"b", "2026-12-01T10:00:00.5Z", false,
		[]byte("HTTP/1.1 200 OK\r\nContent-Type: text/x\u00e9\r\n\r\n"), "sha1:ABC")
	line := string(appendCDXJ(nil, head, 12, 345, string(appendJSONString(nil, "f\\.warc.gz"))))
	want := `com,example)/a%22b 20261201100000 {"url":"http://example.com/a\"b","mime":"text/xé","status":"200",` +
		`"digest":"sha1:ABC","length":"345","offset":"12","filename":"f\\.warc.gz"}` + "\n"
	if line != want {
		t.Errorf("line\n%s want\n%s", line, want)
	}
	var fields map[string]string
	if err := json.Unmarshal([]byte(strings.SplitN(line, " ", 3)[2]), &fields); err != nil || fields["url"] != "http://example.com/a\"b" {
		t.Errorf("JSON %v, %v", fields, err)
	}
	revisit := string(cdxjHead("http://example.com/", "2026", true, []byte("HTTP/1.1 304 Not Modified\r\n\r\n"), ""))
	if revisit != `com,example)/ 2026 {"url":"http://example.com/","mime":"warc/revisit","status":"304"` {
		t.Errorf("revisit head %s", revisit)
	}
	if got := string(appendJSONString(nil, "bad \xff\x01")); got != `"bad \ufffd\u0001"` {
		t.Errorf("escaped %s", got)
	}
}
