package warc

import (
	"bytes"
	"strings"
)

// A body already compressed (a content coding the server applied, or a
// format compressed by nature: images, audio, video, archives, fonts) does
// not shrink when compressed again; deflating it costs as much CPU as a
// page of text. Its record goes into a stored gzip member instead, a few
// bytes larger than the body. Most HTML on the web comes gzip-coded, since
// every fetch asks for it.

// precompressed reports whether the HTTP response head says its body is
// compressed already.
func precompressed(head []byte) bool {
	first := true
	for len(head) > 0 {
		line := head
		if i := bytes.IndexByte(head, '\n'); i >= 0 {
			line, head = head[:i+1], head[i+1:]
		} else {
			head = nil
		}
		line = bytes.TrimRight(line, "\r\n")
		if first {
			first = false
			continue
		}
		if len(line) == 0 {
			return false
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		name, value = bytes.TrimSpace(name), bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Encoding")):
			if codedEncoding(string(value)) {
				return true
			}
		case bytes.EqualFold(name, []byte("Content-Type")):
			m, _, _ := bytes.Cut(value, []byte(";"))
			if compressedType(strings.ToLower(string(bytes.TrimSpace(m)))) {
				return true
			}
		}
	}
	return false
}

// codedEncoding: a Content-Encoding value naming a compressing coding.
func codedEncoding(v string) bool {
	for _, c := range strings.Split(v, ",") {
		switch strings.ToLower(strings.TrimSpace(c)) {
		case "gzip", "x-gzip", "br", "deflate", "zstd", "compress", "x-compress":
			return true
		}
	}
	return false
}

// compressedType: a media type whose bodies are compressed by nature.
// SVG, BMP and TIFF images are not.
func compressedType(mime string) bool {
	switch mime {
	case "image/svg+xml", "image/bmp", "image/tiff", "image/x-icon", "image/vnd.microsoft.icon":
		return false
	case "application/zip", "application/gzip", "application/x-gzip", "application/zstd", "application/x-bzip2",
		"application/x-xz", "application/x-7z-compressed", "application/pdf", "application/wasm",
		"font/woff", "font/woff2", "application/font-woff":
		return true
	}
	for _, p := range []string{"image/", "audio/", "video/"} {
		if strings.HasPrefix(mime, p) {
			return true
		}
	}
	return false
}
