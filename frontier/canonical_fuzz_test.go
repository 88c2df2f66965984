package frontier

import (
	"breakwater/store"
	neturl "net/url"
	"strings"
	"testing"
)

// Fuzz targets for the URL functions, beyond the fast-path differentials
// in canonical_fast_test.go and FuzzCanonicalize's idempotence. Seed
// corpora are in testdata/fuzz/<target>; `go test` runs them as tests.

// checkHTTPURL fails unless s is what the frontier may hold: at most
// MaxURLLength bytes, no fragment, and a URL net/url parses with an http(s)
// scheme and a host, so that net/http can request it.
func checkHTTPURL(t *testing.T, what, s string) *neturl.URL {
	t.Helper()
	if len(s) > MaxURLLength {
		t.Fatalf("%s %q: %d bytes, over MaxURLLength", what, s, len(s))
	}
	if strings.Contains(s, "#") {
		t.Fatalf("%s %q keeps a fragment", what, s)
	}
	u, err := neturl.Parse(s)
	if err != nil {
		t.Fatalf("%s %q does not parse with net/url: %v", what, s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		t.Fatalf("%s %q: scheme %q, host %q; want http(s) and a host", what, s, u.Scheme, u.Host)
	}
	return u
}

// FuzzCanonicalForm: whatever the input, Canonicalize either refuses it or
// returns an idempotent http(s) key with the input's host key, and
// ParseLink agrees with it. ParseLink's URL (a seed, a redirect target) is
// fetched as written, so it must also be one net/http can request; the
// canonical form of such a URL is one too. (A key alone may keep a stray
// "%" that net/url rejects: TestCanonicalize pins that.)
func FuzzCanonicalForm(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw string) {
		canonical, err := Canonicalize(raw)
		link, linkErr := ParseLink(raw)
		if err != nil {
			if linkErr == nil {
				t.Fatalf("ParseLink(%q) = %+v, but Canonicalize refuses it: %v", raw, link, err)
			}
			return
		}
		again, err := Canonicalize(canonical)
		if err != nil || again != canonical {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", raw, canonical, again, err)
		}
		if len(canonical) > MaxURLLength || strings.Contains(canonical, "#") {
			t.Fatalf("canonical form %q: %d bytes or a fragment", canonical, len(canonical))
		}
		host, err := HostKey(canonical)
		if err != nil || host == "" {
			t.Fatalf("HostKey(%q) of a canonical form = %q, %v", canonical, host, err)
		}
		if rawHost, err := HostKey(raw); err != nil || rawHost != host {
			t.Fatalf("HostKey(%q) = %q, %v; its canonical form %q has %q", raw, rawHost, err, canonical, host)
		}
		if !strings.HasPrefix(canonical, "http://") && !strings.HasPrefix(canonical, "https://") {
			t.Fatalf("canonical form %q is not http(s)", canonical)
		}
		if linkErr != nil {
			// Only a URL net/http could not request may be refused.
			if u, perr := neturl.Parse(raw); perr == nil && u.Host != "" {
				t.Fatalf("ParseLink(%q): %v, but Canonicalize takes it as %q and net/url parses it", raw, linkErr, canonical)
			}
			return
		}
		if link.URL != raw || link.Host != host || link.Hash != store.HashOf(canonical) {
			t.Fatalf("ParseLink(%q) = %+v; want the URL as written, host %q, hash of %q", raw, link, host, canonical)
		}
		checkHTTPURL(t, "ParseLink URL", strings.SplitN(raw, "#", 2)[0])
		u := checkHTTPURL(t, "canonical form", canonical)
		// The key is net/url's host of the key: what the fetcher would dial
		// for it is what politeness, breaker and robots.txt state are kept
		// under.
		if u.Host != host {
			t.Fatalf("canonical %q: HostKey %q, net/url host %q", canonical, host, u.Host)
		}
	})
}

// FuzzResolve: a reference resolved against a base (a page and one of its
// links) is refused or is a requestable http(s) URL without a fragment,
// stable when resolved again on its own, and BaseURL.ResolveLink gives the
// same URL with its host key and the hash of its canonical form.
func FuzzResolve(f *testing.F) {
	f.Fuzz(func(t *testing.T, base, ref string) {
		got, err := Resolve(base, ref)
		var b *BaseURL
		if base != "" {
			if b, _ = ParseBaseURL(base); b != nil {
				if link, lerr := b.ResolveLink(ref); (lerr == nil) != (err == nil) {
					t.Fatalf("Resolve(%q, %q) = %q, %v; ResolveLink = %+v, %v", base, ref, got, err, link, lerr)
				}
			}
		}
		if err != nil {
			return
		}
		checkHTTPURL(t, "resolved URL", got)
		if again, err := Resolve("", got); err != nil || again != got {
			t.Fatalf("Resolve(%q, %q) = %q, which resolves on its own to %q, %v", base, ref, got, again, err)
		}
		if b != nil {
			if again, err := b.Resolve(got); err != nil || again != got {
				t.Fatalf("resolved %q, against its own base again: %q, %v", got, again, err)
			}
		}
		canonical, err := Canonicalize(got)
		if err != nil {
			t.Fatalf("Resolve(%q, %q) = %q, which does not canonicalize: %v", base, ref, got, err)
		}
		host, err := HostKey(got)
		if err != nil {
			t.Fatalf("HostKey(%q) of a resolved URL: %v", got, err)
		}
		if b == nil {
			return
		}
		link, err := b.ResolveLink(ref)
		if err != nil {
			t.Fatalf("ResolveLink(%q, %q): %v; Resolve gave %q", base, ref, err, got)
		}
		want := Link{URL: got, Host: host, Hash: store.HashOf(canonical)}
		if link != want {
			t.Fatalf("ResolveLink(%q, %q) = %+v; want %+v (canonical %q)", base, ref, link, want, canonical)
		}
	})
}
