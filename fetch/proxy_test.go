package fetch

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestParseProxy(t *testing.T) {
	good := []struct{ in, want string }{
		{"http://127.0.0.1:3128", "http://127.0.0.1:3128"},
		{"HTTP://Proxy.Corp:3128/", "http://Proxy.Corp:3128"},
		{"https://user:secret@proxy.corp:443", "https://user:xxxxx@proxy.corp:443"},
		{"http://[::1]:3128", "http://[::1]:3128"},
		{"socks5://127.0.0.1:1080", "socks5://127.0.0.1:1080"},
		{"socks5h://user:secret@proxy.corp:1080", "socks5h://user:xxxxx@proxy.corp:1080"},
		{"socks5://user@proxy.corp:1080", "socks5://user@proxy.corp:1080"},
	}
	for _, tt := range good {
		p, err := ParseProxy(tt.in)
		if err != nil {
			t.Errorf("ParseProxy(%q): %v", tt.in, err)
			continue
		}
		if got := p.String(); got != tt.want {
			t.Errorf("ParseProxy(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
	}
	bad := []struct{ in, want string }{
		{"", `--proxy "": want scheme://host:port with scheme http, https, socks5 or socks5h, or env`},
		{"proxy.corp:3128", `--proxy "proxy.corp:3128": want scheme://host:port`},
		{"ENV", `--proxy "ENV": want scheme://host:port`},
		{"ftp://proxy.corp:21", `--proxy "ftp://proxy.corp:21": unsupported scheme "ftp" (want http, https, socks5 or socks5h)`},
		{"socks4://proxy.corp:1080", `--proxy "socks4://proxy.corp:1080": unsupported scheme "socks4"`},
		{"http://:3128", `--proxy "http://:3128": missing host`},
		{"http://user:secret@:3128", `--proxy "http://user:xxxxx@:3128": missing host`},
		{"http://proxy.corp", `--proxy "http://proxy.corp": missing port`},
		{"http://proxy.corp:", `--proxy "http://proxy.corp:": missing port`},
		{"http://proxy.corp:0", `--proxy "http://proxy.corp:0": port "0" is not 1-65535`},
		{"http://proxy.corp:65536", `--proxy "http://proxy.corp:65536": port "65536" is not 1-65535`},
		{"http://user:secret@proxy.corp:abc", `--proxy "http://user:xxxxx@proxy.corp:abc": invalid port ":abc" after host`},
		{"http://proxy.corp:3128/path", `--proxy "http://proxy.corp:3128/path": a proxy URL has no path, query or fragment`},
		{"http://proxy.corp:3128?x=1", `--proxy "http://proxy.corp:3128?x=1": a proxy URL has no path`},
		{"socks5://:secret@proxy.corp:1080", `--proxy "socks5://:xxxxx@proxy.corp:1080": a SOCKS5 user name must be 1-255 bytes`},
		{"socks5://" + strings.Repeat("u", 256) + "@proxy.corp:1080", `a SOCKS5 user name must be 1-255 bytes`},
		{"http://pro xy:3128", `--proxy "http://pro xy:3128": invalid character " " in host name`},
	}
	for _, tt := range bad {
		p, err := ParseProxy(tt.in)
		if err == nil {
			t.Errorf("ParseProxy(%q) = %v, want an error", tt.in, p)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseProxy(%q) error:\n %v\nwant it to contain\n %s", tt.in, err, tt.want)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseProxy(%q) error %q shows the password", tt.in, err)
		}
	}
}

// clearProxyEnv empties every variable httpproxy reads, so the machine's
// own settings do not leak into a test.
func clearProxyEnv(t *testing.T) {
	t.Helper()
	for _, name := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "REQUEST_METHOD"} {
		t.Setenv(name, "")
	}
}

// Not parallel: t.Setenv. ParseProxy("env") reads the environment when
// called and checks what it finds as it checks --proxy.
func TestParseProxyEnv(t *testing.T) {
	for _, tt := range []struct {
		env     map[string]string
		wantErr string
	}{
		{map[string]string{}, "direct"}, // names no proxy: as without --proxy
		{map[string]string{"HTTP_PROXY": "http://proxy.corp:3128", "HTTPS_PROXY": "socks5://proxy.corp:1080"}, ""},
		{map[string]string{"http_proxy": "proxy.corp:3128"}, ""}, // as net/http and curl take it
		{map[string]string{"HTTPS_PROXY": "ftp://proxy.corp:21"}, `--proxy env: HTTPS_PROXY "ftp://proxy.corp:21": unsupported scheme "ftp"`},
		{map[string]string{"HTTP_PROXY": "http://u:secret@proxy.corp"}, `--proxy env: HTTP_PROXY "http://u:xxxxx@proxy.corp": missing port`},
	} {
		clearProxyEnv(t)
		for k, v := range tt.env {
			t.Setenv(k, v)
		}
		p, err := ParseProxy("env")
		if tt.wantErr == "direct" {
			if err != nil || !p.direct() {
				t.Errorf("env %v: %v, %v; want direct", tt.env, p, err)
			}
			continue
		}
		if tt.wantErr == "" {
			if err != nil || p.String() != "env" {
				t.Errorf("env %v: %v, %v; want env", tt.env, p, err)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
			t.Errorf("env %v: error %v, want %s", tt.env, err, tt.wantErr)
		}
	}
}

// The environment's choice follows NO_PROXY, and never proxies loopback
// targets (net/http's rule); the environment is read when ParseProxy is
// called, not later.
func TestProxyEnvChoice(t *testing.T) {
	clearProxyEnv(t)
	t.Setenv("HTTP_PROXY", "http://proxy.corp:3128")
	t.Setenv("HTTPS_PROXY", "http://tls-proxy.corp:3129")
	t.Setenv("NO_PROXY", "skip.example.com,.internal.example,10.0.0.0/8")
	p, err := ParseProxy("env")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HTTP_PROXY", "http://changed.corp:1") // too late for p
	for target, want := range map[string]string{
		"http://www.example.com/":         "http://proxy.corp:3128",
		"https://www.example.com/":        "http://tls-proxy.corp:3129",
		"http://skip.example.com/":        "",
		"http://a.internal.example/":      "",
		"http://10.1.2.3/":                "",
		"http://11.1.2.3/":                "http://proxy.corp:3128",
		"http://localhost:8080/":          "",
		"http://127.0.0.1:8080/":          "",
		"http://www.skip.example.com:81/": "", // a NO_PROXY name covers its subdomains
		"http://noskip.example.com/":      "http://proxy.corp:3128",
	} {
		u, _ := url.Parse(target)
		got, err := p.env(u)
		if err != nil {
			t.Fatal(err)
		}
		s := ""
		if got != nil {
			s = got.String()
		}
		if s != want {
			t.Errorf("proxy for %s = %v, want %q", target, got, want)
		}
	}
}

// Not parallel: t.Setenv. CheckGuard refuses a socks5h proxy, named by
// --proxy or by the environment, and names it (password hidden) and the
// way out; every other proxy passes.
func TestProxyCheckGuard(t *testing.T) {
	clearProxyEnv(t)
	for _, tt := range []struct {
		proxy string
		env   map[string]string
		want  string // "" for nil, else the start of the error
	}{
		{"http://proxy.corp:3128", nil, ""},
		{"https://proxy.corp:443", nil, ""},
		{"socks5://proxy.corp:1080", nil, ""},
		{"socks5h://u:secret@proxy.corp:1080", nil, "--proxy socks5h://u:xxxxx@proxy.corp:1080: a socks5h proxy resolves target names itself"},
		{"env", map[string]string{"HTTP_PROXY": "http://proxy.corp:3128", "HTTPS_PROXY": "socks5://proxy.corp:1080"}, ""},
		{"env", map[string]string{"https_proxy": "socks5h://u:secret@proxy.corp:1080"}, "--proxy env: HTTPS_PROXY socks5h://u:xxxxx@proxy.corp:1080: a socks5h proxy"},
		{"env", map[string]string{}, ""},
	} {
		clearProxyEnv(t)
		for k, v := range tt.env {
			t.Setenv(k, v)
		}
		p, err := ParseProxy(tt.proxy)
		if err != nil {
			t.Fatal(err)
		}
		err = p.CheckGuard()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s %v: CheckGuard = %v, want nil", tt.proxy, tt.env, err)
		case tt.want != "" && (!errors.Is(err, ErrProxyResolvesNames) || !strings.HasPrefix(err.Error(), tt.want) ||
			!strings.Contains(err.Error(), "--allow-private") || strings.Contains(err.Error(), "secret")):
			t.Errorf("%s %v: CheckGuard = %v, want ErrProxyResolvesNames starting %q", tt.proxy, tt.env, err, tt.want)
		}
	}
}
