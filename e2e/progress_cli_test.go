package e2e

import (
	"bytes"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// On a terminal the crawl draws a progress line on stderr, redrawn in
// place, and erases it before anything else is written and at the end.
func TestProgressLineOnATerminal(t *testing.T) {
	bin := buildBinary(t)
	site := startSite(t, 2, 20)
	db := tempDB(t)
	args := append([]string{"crawl", "--db", db, "--allow-private", "--delay", "30ms", "--sitemaps=false",
		"--log-level", "info"}, site.Roots()...)
	cmd := exec.Command(bin, args...)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	out := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(ptmx); out <- b }() // ends with an error once the child exits
	if err := cmd.Wait(); err != nil {
		t.Fatalf("crawl: %v\n%s", err, stdout.String())
	}
	var got []byte
	select {
	case got = <-out:
	case <-time.After(5 * time.Second):
		ptmx.Close()
		got = <-out
	}
	s := string(got)
	draws := strings.Count(s, "fetched ")
	if draws < 3 || !strings.Contains(s, "\r") {
		t.Fatalf("%d progress draws on the terminal, want it redrawn in place:\n%q", draws, s)
	}
	last := strings.LastIndex(s, "fetched ")
	erased := strings.LastIndex(s, "\x1b[2K")
	if erased < last {
		t.Errorf("the progress line was left on the terminal at the end:\n%q", s[max(0, last-200):])
	}
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, "msg=") && strings.Contains(line[:strings.Index(line, "msg=")], "fetched ") &&
			!strings.Contains(line, "\x1b[2K") {
			t.Errorf("a log line was written over the progress line: %q", line)
		}
	}
	if !strings.Contains(stdout.String(), "crawl finished") {
		t.Errorf("stdout: %s", stdout.String())
	}
}
