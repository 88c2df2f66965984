package fetch

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpproxy"
)

// Proxy is where a Fetcher's requests leave through, when not directly:
// one HTTP, HTTPS or SOCKS5 proxy, or the proxies the environment names.
// ParseProxy makes one; a Proxy is immutable and safe to share. The zero
// Proxy sends every request direct, through the router all the same.
type Proxy struct {
	url *url.URL                         // the one proxy; nil for env
	env func(*url.URL) (*url.URL, error) // the environment's proxy for a target, nil for none
	// named is what the environment names, for CheckGuard: the variable
	// and its proxy URL as read.
	named []namedProxy
}

type namedProxy struct {
	name string
	url  *url.URL
}

// ParseProxy parses the --proxy flag:
//
//	http://[user:pass@]host:port     an HTTP proxy (CONNECT for https targets)
//	https://[user:pass@]host:port    the same, over TLS to the proxy
//	socks5://[user:pass@]host:port   SOCKS5; target names are resolved here
//	socks5h://[user:pass@]host:port  SOCKS5; the proxy resolves target names
//	                                 (only without the address guard: see CheckGuard)
//	env                              HTTPS_PROXY, HTTP_PROXY and NO_PROXY
//
// For env the environment is read now, as net/http reads it (lower-case
// names too, a value without a scheme is http://), except that a value
// must name a port; as in net/http, targets on localhost and loopback
// addresses are never proxied. Errors quote the input, password hidden.
func ParseProxy(s string) (*Proxy, error) {
	if s == "env" {
		return proxyFromEnv()
	}
	u, err := parseProxyURL(s)
	if err != nil {
		return nil, fmt.Errorf("--proxy %q: %w", redactProxy(s), err)
	}
	return &Proxy{url: u}, nil
}

// String is the proxy URL with its password hidden, or "env".
func (p *Proxy) String() string {
	switch {
	case p.url != nil:
		return p.url.Redacted()
	case p.env != nil:
		return "env"
	}
	return "direct"
}

// direct reports whether p sends nothing through a proxy (the zero
// Proxy, or an environment that names none): the fetcher then needs no
// router, and keeps its per-host caps.
func (p *Proxy) direct() bool { return p.url == nil && p.env == nil }

// isSOCKS reports whether p is one SOCKS5 proxy, dialled by the fetcher
// itself rather than by the transport.
func (p *Proxy) isSOCKS() bool {
	return p.url != nil && (p.url.Scheme == "socks5" || p.url.Scheme == "socks5h")
}

// CheckGuard reports whether the address guard (Options.AllowPrivate
// off) can hold through p: nil, or an error wrapping
// ErrProxyResolvesNames that names the socks5h proxy (for env, the
// variable too). A socks5h proxy resolves target names itself, so the
// address it reaches is not the one the guard checked; a Fetcher without
// AllowPrivate fails every request through one with that error. Check
// before crawling to refuse the setting at once.
func (p *Proxy) CheckGuard() error {
	if p.url != nil && p.url.Scheme == "socks5h" {
		return fmt.Errorf("--proxy %s: %w", p.url.Redacted(), ErrProxyResolvesNames)
	}
	for _, n := range p.named {
		if n.url.Scheme == "socks5h" {
			return fmt.Errorf("--proxy env: %s %s: %w", n.name, n.url.Redacted(), ErrProxyResolvesNames)
		}
	}
	return nil
}

func proxyFromEnv() (*Proxy, error) {
	cfg := httpproxy.FromEnvironment()
	var named []namedProxy
	for _, v := range []struct{ name, value string }{{"HTTP_PROXY", cfg.HTTPProxy}, {"HTTPS_PROXY", cfg.HTTPSProxy}} {
		if v.value == "" {
			continue
		}
		raw := v.value
		if !strings.Contains(raw, "://") {
			raw = "http://" + raw // as net/http and curl read "host:port"
		}
		u, err := parseProxyURL(raw)
		if err != nil {
			return nil, fmt.Errorf("--proxy env: %s %q: %w", v.name, redactProxy(v.value), err)
		}
		named = append(named, namedProxy{v.name, u})
	}
	if len(named) == 0 {
		return &Proxy{}, nil // the environment names no proxy: direct
	}
	return &Proxy{env: cfg.ProxyFunc(), named: named}, nil
}

func parseProxyURL(s string) (*url.URL, error) {
	if !strings.Contains(s, "://") {
		return nil, errors.New("want scheme://host:port with scheme http, https, socks5 or socks5h, or env")
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the url.Error would repeat the input, password and all
		}
		return nil, err
	}
	u.Scheme = strings.ToLower(u.Scheme)
	switch u.Scheme {
	case "http", "https", "socks5", "socks5h":
	default:
		return nil, fmt.Errorf("unsupported scheme %q (want http, https, socks5 or socks5h)", u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, errors.New("missing host")
	}
	if u.Port() == "" {
		return nil, errors.New("missing port")
	}
	if n, err := strconv.Atoi(u.Port()); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("port %q is not 1-65535", u.Port())
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("a proxy URL has no path, query or fragment")
	}
	u.Path = ""
	if u.User != nil && (u.Scheme == "socks5" || u.Scheme == "socks5h") {
		// RFC 1929 carries each in one length byte, and a user name is required.
		pass, _ := u.User.Password()
		if n := len(u.User.Username()); n == 0 || n > 255 || len(pass) > 255 {
			return nil, errors.New("a SOCKS5 user name must be 1-255 bytes and a password at most 255")
		}
	}
	return u, nil
}

// redactProxy hides the password in a proxy URL that may not parse:
// whatever lies between the first colon after "//" and the last "@" of
// the authority.
func redactProxy(s string) string {
	_, rest, ok := strings.Cut(s, "//")
	if !ok {
		return s
	}
	start := len(s) - len(rest)
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	at := strings.LastIndex(authority, "@")
	colon := strings.Index(authority, ":")
	if at < 0 || colon < 0 || colon > at {
		return s
	}
	return s[:start+colon+1] + "xxxxx" + s[start+at:]
}
