package e2e

// Tests of the command line, run in-process through run and exitCode the
// way main calls them: usage and flag errors here, whole crawls, resumes,
// the control socket and crashes of a real process in cli_test.go. Every
// site is a demosite on 127.0.0.1 and every database lives in t.TempDir().

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"breakwater/cli"
	"breakwater/crawl"
	"breakwater/demosite"
)

// TestMain fails the package when a command leaves a goroutine behind (a
// crawl must stop its workers and its control socket before run returns),
// and removes the binary built for the crash test.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// result is what one invocation of the program printed and how it exited.
type result struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("exit %d after %s\n--- stdout:\n%s--- stderr:\n%s", r.code, r.elapsed.Round(time.Millisecond), r.stdout, r.stderr)
}

// runCLI runs the program with args as main would, without signals.
func runCLI(t testing.TB, ctx context.Context, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	err := cli.Run(ctx, args, &stdout, &stderr)
	code := cli.ExitCode(err, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
}

// mustRun runs the program and fails the test unless it exits with want.
func mustRun(t testing.TB, want int, args ...string) result {
	t.Helper()
	r := runCLI(t, context.Background(), args...)
	if r.code != want {
		t.Fatalf("breakwater %s: want exit %d, got %s", strings.Join(args, " "), want, r)
	}
	return r
}

// crawlArgs are the arguments of a fast crawl of local sites into db.
func crawlArgs(db string, extra ...string) []string {
	args := []string{"crawl", "--db", db, "--allow-private", "--delay", "10ms", "--timeout", "2s",
		"--connect-timeout", "1s", "--log-format", "text", "--log-level", "warn",
		"--sitemaps=false"} // the demo site has no sitemaps; these tests count every request
	return append(args, extra...)
}

func startSite(t testing.TB, hosts, pages int) *demosite.Site {
	t.Helper()
	site, err := demosite.Start(demosite.BenchSpecs(hosts, pages, false, 0), demosite.SiteOptions{Seed: 1})
	if err != nil {
		t.Fatalf("start demo site: %v", err)
	}
	t.Cleanup(func() {
		if err := site.Close(); err != nil {
			t.Errorf("close demo site: %v", err)
		}
	})
	return site
}

// hostKey is the host:port the crawler names a site host by.
func hostKey(t testing.TB, h *demosite.Host) string {
	t.Helper()
	u, err := url.Parse(h.BaseURL())
	if err != nil {
		t.Fatalf("parse %s: %v", h.BaseURL(), err)
	}
	return u.Host
}

func tempDB(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "crawl.db")
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds or d passes. Real sockets and real
// processes do not run in fake time, so these tests poll.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// flagLine returns the --help line of flag name.
func flagLine(help, name string) string {
	re := regexp.MustCompile(`(?m)^\s+(-\w, )?--` + regexp.QuoteMeta(name) + `\b.*$`)
	return re.FindString(help)
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		want       int
		stdoutHas  []string
		stderrHas  []string
		stdoutNone bool
	}{
		{name: "no arguments", args: nil, want: cli.ExitUsage,
			stdoutHas: []string{"Usage: breakwater COMMAND", "crawl", "status", "export", "pause"},
			stderrHas: []string{"no command given"}},
		{name: "unknown command", args: []string{"frobnicate"}, want: cli.ExitUsage,
			stderrHas: []string{`unknown command "frobnicate"`, "Usage: breakwater COMMAND"}, stdoutNone: true},
		{name: "--help", args: []string{"--help"}, want: cli.ExitOK,
			stdoutHas: []string{"Usage: breakwater COMMAND", "crawl", "status", "export", "hosts",
				"transitions", "cases", "pause", "unpause", "demo"}},
		{name: "help", args: []string{"help"}, want: cli.ExitOK, stdoutHas: []string{"Usage: breakwater COMMAND"}},
		{name: "version", args: []string{"--version"}, want: cli.ExitOK, stdoutHas: []string{"breakwater " + crawl.Version}},
		{name: "status --help", args: []string{"status", "--help"}, want: cli.ExitOK, stdoutHas: []string{"--db", "--json"}},
		{name: "pause --help", args: []string{"pause", "--help"}, want: cli.ExitOK, stdoutHas: []string{"--reason"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, context.Background(), tt.args...)
			if r.code != tt.want {
				t.Fatalf("want exit %d, got %s", tt.want, r)
			}
			for _, s := range tt.stdoutHas {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, r)
				}
			}
			for _, s := range tt.stderrHas {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, r)
				}
			}
			if tt.stdoutNone && r.stdout != "" {
				t.Errorf("stdout should be empty:\n%s", r)
			}
		})
	}
}

func TestCrawlHelpListsEveryFlagWithDefault(t *testing.T) {
	r := mustRun(t, cli.ExitOK, "crawl", "--help")
	flags := []string{"db", "seeds", "workers", "host-concurrency", "delay", "scope", "max-depth", "max-pages", "max-pages-per-host",
		"include", "exclude", "user-agent", "timeout", "connect-timeout", "max-body", "allow-private",
		"max-duration", "breaker", "breaker-threshold", "breaker-rest", "breaker-probes", "breaker-rest-max",
		"give-up-after", "retry-failed", "retries", "retry-base", "retry-max", "retry-budget", "local-fault-hosts", "local-fault-share", "local-fault-window",
		"log-format", "log-level"}
	for _, f := range flags {
		if flagLine(r.stdout, f) == "" {
			t.Errorf("crawl --help does not list --%s:\n%s", f, r.stdout)
		}
	}
	defaults := map[string]string{
		"db":                `(default "breakwater.db")`,
		"workers":           "(default 32)",
		"delay":             "(default 1s)",
		"scope":             `(default "seeds")`,
		"host-concurrency":  "(default 1)",
		"max-depth":         "(default 20)",
		"timeout":           "(default 30s)",
		"breaker":           "(default true)",
		"breaker-threshold": "(default 8)",
		"breaker-rest":      "(default 5m0s)",
		"retries":           "(default 3)",
		"retry-budget":      "(default 0.2)",
	}
	for f, want := range defaults {
		if line := flagLine(r.stdout, f); !strings.Contains(line, want) {
			t.Errorf("--%s line %q lacks %s", f, line, want)
		}
	}
}

func TestBadFlagsExitTwoNamingTheFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"workers zero", []string{"--workers", "0"}, "--workers"},
		{"unknown scope", []string{"--scope", "bogus"}, "--scope"},
		{"negative delay", []string{"--delay=-1s"}, "--delay"},
		{"bad include regexp", []string{"--include", "("}, "--include"},
		{"bad exclude regexp", []string{"--exclude", "[z-a]"}, "--exclude"},
		{"rest max below rest", []string{"--breaker-rest", "10s", "--breaker-rest-max", "5s"}, "--breaker-rest-max"},
		{"unparsable duration", []string{"--timeout", "soon"}, "timeout"},
		{"unknown flag", []string{"--bogus"}, "bogus"},
		{"bad log format", []string{"--log-format", "xml"}, "--log-format"},
		{"missing seeds file", []string{"--seeds", "/nonexistent/seeds.txt"}, "--seeds"},
		{"bad seed argument", []string{"ftp://example.com/file"}, "seed argument"},
		{"socks5h under the address guard", []string{"--proxy", "socks5h://127.0.0.1:1080"}, "--proxy socks5h://127.0.0.1:1080: a socks5h proxy resolves target names itself"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := tempDB(t)
			args := append([]string{"crawl", "--db", db}, tt.args...)
			if tt.name != "bad seed argument" {
				args = append(args, "http://127.0.0.1:1/")
			}
			r := mustRun(t, cli.ExitUsage, args...)
			if !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr does not name %s:\n%s", tt.want, r)
			}
			if fileExists(db) {
				t.Errorf("a rejected command created %s", db)
			}
		})
	}
}

func TestSeedsFileBadLineNamesFileAndLine(t *testing.T) {
	dir := t.TempDir()
	seeds := filepath.Join(dir, "seeds.txt")
	writeFile(t, seeds, "# my seeds\nhttp://127.0.0.1:1/\n\nftp://example.com/file\n")
	db := filepath.Join(dir, "crawl.db")
	r := mustRun(t, cli.ExitUsage, "crawl", "--db", db, "--seeds", seeds)
	if !strings.Contains(r.stderr, seeds+" line 4") {
		t.Errorf("stderr should name %q line 4:\n%s", seeds, r)
	}
	if fileExists(db) {
		t.Errorf("a rejected seeds file created %s", db)
	}
}

func TestNoSeedsOnFreshDBLeavesNoFile(t *testing.T) {
	db := tempDB(t)
	r := mustRun(t, cli.ExitUsage, crawlArgs(db)...)
	if !strings.Contains(r.stderr, "no seed URLs") {
		t.Errorf("stderr should say there are no seeds:\n%s", r)
	}
	entries, err := os.ReadDir(filepath.Dir(db))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left behind %s", e.Name())
	}
}

func TestReadCommandsNeedAnExistingFile(t *testing.T) {
	for _, cmd := range []string{"status", "export", "hosts", "transitions", "cases"} {
		t.Run(cmd, func(t *testing.T) {
			db := tempDB(t)
			r := mustRun(t, cli.ExitUsage, cmd, "--db", db)
			if !strings.Contains(r.stderr, "no such file") {
				t.Errorf("stderr should say the file is missing:\n%s", r)
			}
			if fileExists(db) {
				t.Errorf("%s created %s", cmd, db)
			}
		})
	}
}

// Crash tests run the real binary; it is built once per test process.
var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func buildBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "breakwater-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "breakwater")
		out, err := exec.Command("go", "build", "-o", binPath, "..").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
