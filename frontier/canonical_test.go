package frontier

import (
	"errors"
	"strings"
	"testing"
)

func TestCanonicalize(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"already canonical", "http://example.com/a", "http://example.com/a"},
		{"root path added", "http://example.com", "http://example.com/"},
		{"scheme and host lower-cased", "HTTP://Example.COM/Path", "http://example.com/Path"},
		{"path case kept", "http://example.com/A/b", "http://example.com/A/b"},
		{"idna", "http://Bücher.example/", "http://xn--bcher-kva.example/"},
		{"default http port dropped", "http://example.com:80/", "http://example.com/"},
		{"default https port dropped", "https://example.com:443/", "https://example.com/"},
		{"other port kept", "http://example.com:8080/", "http://example.com:8080/"},
		{"https port on http kept", "http://example.com:443/", "http://example.com:443/"},
		{"fragment dropped", "http://example.com/a#top", "http://example.com/a"},
		{"empty fragment dropped", "http://example.com/a#", "http://example.com/a"},
		{"dot segments", "http://example.com/a/./b/../c", "http://example.com/a/c"},
		{"escaped dot segments", "http://example.com/a/%2e%2E/c", "http://example.com/c"},
		{"dot segments above root", "http://example.com/../../a", "http://example.com/a"},
		{"tilde decoded", "http://example.com/%7euser", "http://example.com/~user"},
		{"unreserved decoded", "http://example.com/%41%2D%5f%2e%30", "http://example.com/A-_.0"},
		{"slash kept encoded and upper-cased", "http://example.com/a%2fb", "http://example.com/a%2Fb"},
		{"reserved in query kept", "http://example.com/?a=%26%3d%2f", "http://example.com/?a=%26%3D%2F"},
		{"unreserved in query decoded", "http://example.com/?a=%7e", "http://example.com/?a=~"},
		{"utf-8 escapes upper-cased", "http://example.com/caf%c3%a9", "http://example.com/caf%C3%A9"},
		{"raw utf-8 encoded", "http://example.com/café", "http://example.com/caf%C3%A9"},
		{"stray percent kept", "http://example.com/100%", "http://example.com/100%"},
		{"decoding must not complete a stray %X", "http://example.com/%7%41", "http://example.com/%7%41"},
		{"decoding must not complete a stray %", "http://example.com/%%41%42", "http://example.com/%%41B"},
		{"stray percent then non-hex decoded", "http://example.com/%%7e", "http://example.com/%~"},
		{"empty query removed", "http://example.com/a?", "http://example.com/a"},
		{"empty query and fragment", "http://example.com/a?#x", "http://example.com/a"},
		{"query order kept", "http://example.com/?b=2&a=1", "http://example.com/?b=2&a=1"},
		{"repeated keys kept", "http://example.com/?a=2&a=1", "http://example.com/?a=2&a=1"},
		{"ipv4 numeric forms", "http://0x7f.1/", "http://127.0.0.1/"},
		{"ipv6 with port", "http://[::1]:8080/x", "http://[::1]:8080/x"},
		{"surrounding spaces trimmed", "  http://example.com/  ", "http://example.com/"},
		{"backslash as slash", `http:\\example.com\a`, "http://example.com/a"},
		{"userinfo kept", "http://u:p@example.com/", "http://u:p@example.com/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize(tt.in)
			if err != nil {
				t.Fatalf("Canonicalize(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("Canonicalize(%q) = %q, want %q", tt.in, got, tt.want)
			}
			assertIdempotent(t, got)
		})
	}
}

func TestCanonicalizeErrors(t *testing.T) {
	tests := []struct {
		name, in string
		is       error  // sentinel to match, if any
		contains string // text the message must carry
	}{
		{"ftp", "ftp://example.com/", ErrUnsupportedScheme, `"ftp"`},
		{"mailto", "mailto:a@example.com", ErrUnsupportedScheme, "mailto"},
		{"javascript", "javascript:alert(1)", ErrUnsupportedScheme, "javascript"},
		{"data", "data:text/html,hi", ErrUnsupportedScheme, "data"},
		{"file", "file:///etc/passwd", ErrUnsupportedScheme, "file"},
		{"relative", "/just/a/path", nil, "/just/a/path"},
		{"empty", "", nil, `""`},
		{"no host", "http://", nil, "http://"},
		{"bad host", "http://exa mple.com/", nil, "exa mple.com"},
		{"bad port", "http://example.com:99999/", nil, "99999"},
		{"too long", "http://example.com/" + strings.Repeat("a", MaxURLLength), ErrURLTooLong, "http://example.com/aaa"},
		{"too long after encoding", "http://example.com/" + strings.Repeat("é", 500), ErrURLTooLong, "normalized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize(tt.in)
			if err == nil {
				t.Fatalf("Canonicalize(%q) = %q, want error", tt.in, got)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("error %q does not contain %q", err, tt.contains)
			}
		})
	}
}

func TestCanonicalizeLengthBoundary(t *testing.T) {
	prefix := "http://example.com/"
	exact := prefix + strings.Repeat("a", MaxURLLength-len(prefix))
	if _, err := Canonicalize(exact); err != nil {
		t.Errorf("URL of exactly %d bytes rejected: %v", MaxURLLength, err)
	}
	if _, err := Canonicalize(exact + "a"); !errors.Is(err, ErrURLTooLong) {
		t.Errorf("URL of %d bytes: err = %v, want ErrURLTooLong", MaxURLLength+1, err)
	}
}

func TestResolve(t *testing.T) {
	const base = "http://example.com/a/b/c?q=1#frag"
	tests := []struct {
		name, base, ref, want string
	}{
		{"relative file", base, "d", "http://example.com/a/b/d"},
		{"parent", base, "../x", "http://example.com/a/x"},
		{"absolute path", base, "/root", "http://example.com/root"},
		{"query only", base, "?z=9", "http://example.com/a/b/c?z=9"},
		{"fragment only is the page", base, "#top", "http://example.com/a/b/c?q=1"},
		{"empty ref is the page", base, "", "http://example.com/a/b/c?q=1"},
		{"scheme relative", base, "//other.example/p#f", "http://other.example/p"},
		{"absolute https", base, "HTTPS://Other.example:443/P", "https://other.example/P"},
		{"escapes kept as written", base, "/%7e/%2f?b=2&a=1", "http://example.com/%7e/%2f?b=2&a=1"},
		{"empty query kept as written", base, "/x?", "http://example.com/x?"},
		{"spaces trimmed and encoded", base, "  /a b  ", "http://example.com/a%20b"},
		{"no base absolute", "", "http://example.com/x#y", "http://example.com/x"},
		{"port kept", "http://127.0.0.1:8080/a", "b", "http://127.0.0.1:8080/b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(tt.base, tt.ref)
			if err != nil {
				t.Fatalf("Resolve(%q, %q): %v", tt.base, tt.ref, err)
			}
			if got != tt.want {
				t.Errorf("Resolve(%q, %q) = %q, want %q", tt.base, tt.ref, got, tt.want)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	const base = "http://example.com/a"
	tests := []struct {
		name, base, ref string
	}{
		{"javascript", base, "javascript:void(0)"},
		{"mailto", base, "mailto:x@example.com"},
		{"data", base, "data:text/plain,hi"},
		{"tel", base, "tel:+4712345678"},
		{"ftp", base, "ftp://example.com/f"},
		{"bad host", base, "http://exa mple.com/"},
		{"stray percent net/url rejects", base, "/100%zz"},
		{"relative without base", "", "/a"},
		{"non-http base", "ftp://example.com/", "a"},
		{"too long", base, "/" + strings.Repeat("x", MaxURLLength)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(tt.base, tt.ref)
			if err == nil {
				t.Fatalf("Resolve(%q, %q) = %q, want error", tt.base, tt.ref, got)
			}
		})
	}
}

func TestBaseURLReuse(t *testing.T) {
	const raw = "http://example.com/a/b/c?q=1"
	b, err := ParseBaseURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	// Each reference would corrupt a base shared by pointer: a shortened
	// path, a replaced query, a new host.
	refs := []string{"../../x", "?z", "//other.example/p", "d", "", "#f", "/abs", "e/./f/../g"}
	for range 2 {
		for _, ref := range refs {
			want, err := Resolve(raw, ref)
			if err != nil {
				t.Fatalf("Resolve(%q): %v", ref, err)
			}
			if got, err := b.Resolve(ref); err != nil || got != want {
				t.Errorf("BaseURL.Resolve(%q) = %q, %v; want %q", ref, got, err, want)
			}
		}
	}
	if _, err := ParseBaseURL("mailto:a@example.com"); !errors.Is(err, ErrUnsupportedScheme) {
		t.Errorf("ParseBaseURL(mailto) err = %v, want ErrUnsupportedScheme", err)
	}
}

func TestHostKey(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"http://Example.com/a", "example.com"},
		{"http://example.com:80/", "example.com"},
		{"https://example.com:443/", "example.com"},
		{"http://127.0.0.1:8080/x", "127.0.0.1:8080"},
		{"https://example.com:80/", "example.com:80"},
		{"http://bücher.example/", "xn--bcher-kva.example"},
		{"http://[::1]:8080/", "[::1]:8080"},
		{"http://u:p@example.com/", "example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := HostKey(tt.in)
			if err != nil {
				t.Fatalf("HostKey(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("HostKey(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	if _, err := HostKey("mailto:a@example.com"); !errors.Is(err, ErrUnsupportedScheme) {
		t.Errorf("HostKey(mailto) err = %v, want ErrUnsupportedScheme", err)
	}
}

func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		"http://example.com/", "HTTP://Ex.COM:80/a/./b/../c?#f", "https://bücher.example/%7e%2f",
		"http://[::1]:8080/?", "http://a/%2e%2E/%zz%", "http://0x7f.1/%41", "http:\\\\a\\b?x=%e2%82",
		"http:0/%7%41", "http://a/%%41%42",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := Canonicalize(raw)
		if err != nil {
			return
		}
		assertIdempotent(t, got)
	})
}

func assertIdempotent(t *testing.T, canonical string) {
	t.Helper()
	again, err := Canonicalize(canonical)
	if err != nil {
		t.Fatalf("Canonicalize(%q) (a canonical form) failed: %v", canonical, err)
	}
	if again != canonical {
		t.Fatalf("not idempotent: %q -> %q", canonical, again)
	}
}

func BenchmarkCanonicalize(b *testing.B) {
	const raw = "HTTP://WWW.Example.COM:80/a/./b/../Caf%c3%a9/%7euser/index.html?b=2&a=%2f#section"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResolveLinks resolves the links of a page of the crawl bench's
// site against it: paths from the root, relative paths, an empty query,
// a fragment, other hosts and a mailto:, in the site's proportions.
func BenchmarkResolveLinks(b *testing.B) {
	const page = "http://127.0.0.1:36047/p/17"
	refs := []string{"/p/18", "/p/19", "/p/34?", "/p/35#comments", "../p/52", "http://127.0.0.1:41234/p/26",
		"http://127.0.0.1:41234/", "mailto:webmaster@bench-001.example"}
	b.ReportAllocs()
	for b.Loop() {
		base, err := ParseBaseURL(page)
		if err != nil {
			b.Fatal(err)
		}
		for _, ref := range refs {
			base.ResolveLink(ref)
		}
	}
}
