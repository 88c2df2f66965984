package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"breakwater/cli"
	"breakwater/warc"
)

// exportedStatuses maps every stored result's URL to its status (0 when
// no answer came).
func exportedStatuses(t *testing.T, db string) map[string]int {
	t.Helper()
	r := mustRun(t, cli.ExitOK, "export", "--db", db, "--format", "jsonl")
	out := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var row struct {
			URL    string `json:"url"`
			Status int    `json:"status"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("export line: %v\n%s", err, sc.Text())
		}
		out[row.URL] = row.Status
	}
	return out
}

// checkArchive asserts the invariant of --warc: warc-check is clean, and
// every URL the database has done with an answer is in exactly one
// response or revisit record, and no other page is (robots.txt aside,
// which is fetched again by a later run).
func checkArchive(t *testing.T, db, dir string) *warc.Report {
	t.Helper()
	if r := runCLI(t, t.Context(), "warc-check", dir); r.code != cli.ExitOK {
		t.Fatalf("warc-check %s: %s", dir, r)
	}
	rep, err := warc.Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	done := exportedStatuses(t, db)
	answered := 0
	for url, status := range done {
		if status == 0 {
			continue
		}
		answered++
		if n := rep.Responses[url]; n != 1 {
			t.Errorf("%s (status %d) is done in the database and in %d response records", url, status, n)
		}
	}
	for url := range rep.Responses {
		if _, ok := done[url]; !ok && !strings.HasSuffix(url, "/robots.txt") {
			t.Errorf("%s is in the archive but not done in the database", url)
		}
	}
	if answered == 0 {
		t.Fatal("nothing was fetched")
	}
	return rep
}

func TestWARCRoundTrip(t *testing.T) {
	site := startSite(t, 3, 30)
	db := tempDB(t)
	dir := filepath.Join(t.TempDir(), "warc")
	mustRun(t, cli.ExitOK, crawlArgs(db, append([]string{"--warc", dir}, site.Roots()...)...)...)
	rep := checkArchive(t, db, dir)
	if rep.Records["request"] != rep.Records["response"]+rep.Records["revisit"] {
		t.Errorf("records %v: every response needs its request", rep.Records)
	}
	if len(exportedStatuses(t, db)) < 90 {
		t.Errorf("only %d results", len(exportedStatuses(t, db)))
	}
	// A damaged file makes warc-check say so and exit 1.
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	data, _ := os.ReadFile(files[0])
	data[len(data)-6] ^= 0xff // in the last member's CRC-32, which no record digest covers
	os.WriteFile(files[0], data, 0o644)
	if r := runCLI(t, t.Context(), "warc-check", dir); r.code != cli.ExitError || !strings.Contains(r.stdout, "problem:") {
		t.Errorf("warc-check of a damaged file: %s", r)
	}
}

// TestWARCCrashResume kills a crawl with SIGKILL at random moments while it
// writes its archive, resumes it each time, and lets the last run finish:
// no page done in the database is missing from the archive or in it twice,
// and no unfinished file is left behind.
func TestWARCCrashResume(t *testing.T) {
	bin := buildBinary(t)
	site := startSite(t, 4, 60)
	db := tempDB(t)
	dir := filepath.Join(t.TempDir(), "warc")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 14))
	args := crawlArgs(db, append([]string{"--warc", dir, "--warc-size", "1048576", "--delay", "20ms"}, site.Roots()...)...)
	kills := 0
	for kills < 5 {
		cmd := exec.Command(bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		before := pageRequests(site)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		target := before + 5 + rng.IntN(25)
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		deadline := time.After(20 * time.Second)
		over := false // the run ended by itself
	wait:
		for pageRequests(site) < target {
			select {
			case err := <-exited:
				t.Logf("run %d finished before its kill (%v): %s", kills+1, err, stderr.String())
				over = true
				break wait
			case <-deadline:
				cmd.Process.Kill()
				t.Fatalf("run %d made no progress: %s", kills+1, stderr.String())
			case <-time.After(time.Duration(rng.IntN(15)) * time.Millisecond):
			}
		}
		if over {
			break // the crawl is over: no more moments to kill it at
		}
		cmd.Process.Signal(syscall.SIGKILL)
		err := <-exited
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Logf("run %d ended by itself before the kill: %v", kills+1, err)
			break
		}
		kills++
		args = crawlArgs(db) // a resume: the settings, --warc included, are stored
	}
	if kills < 5 {
		t.Fatalf("only %d kills before the crawl ended: the site is too small for the test", kills)
	}
	out, err := exec.Command(bin, crawlArgs(db)...).CombinedOutput()
	if err != nil {
		t.Fatalf("final resume: %v\n%s", err, out)
	}
	if open, _ := filepath.Glob(filepath.Join(dir, "*.open")); len(open) != 0 {
		t.Fatalf("unfinished files left: %v", open)
	}
	files, _ := os.ReadDir(dir)
	rep := checkArchive(t, db, dir)
	t.Logf("%d kills; %d files; records %v", kills, len(files), rep.Records)
	if got, want := len(exportedStatuses(t, db)), len(site.URLs()); got < want {
		t.Errorf("%d results after the crawl, want the site's %d URLs", got, want)
	}
}
