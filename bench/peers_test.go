package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestWget2ArgsCrawlLikeBreakwater(t *testing.T) {
	args := wget2Args("/s/seeds.txt", "/s/out")
	for _, want := range [][]string{{"--recursive"}, {"--level", "inf"}, {"--max-threads", "32"}, {"--robots=on"},
		{"--wait", "0"}, {"--delete-after"}, {"--input-file", "/s/seeds.txt"}, {"--directory-prefix", "/s/out"}} {
		i := slices.Index(args, want[0])
		if i < 0 || i+len(want) > len(args) || !slices.Equal(args[i:i+len(want)], want) {
			t.Errorf("wget2 args %q lack %q", args, want)
		}
	}
	if slices.Contains(args, "--span-hosts") || slices.Contains(args, "-H") {
		t.Errorf("wget2 args %q span hosts: the crawl must keep to the seeds' hosts", args)
	}
	bw := breakwaterArgs("/s/seeds.txt", "/s/bw", 4)
	for _, want := range [][]string{{"--workers", "32"}, {"--host-concurrency", "4"}, {"--delay", "0"}, {"--seeds", "/s/seeds.txt"}} {
		if i := slices.Index(bw, want[0]); i < 0 || bw[i+1] != want[1] {
			t.Errorf("breakwater args %q lack %q", bw, want)
		}
	}
}

// peerRuns makes the runs of one tool at the given rates and CPU per page.
func peerRuns(tool string, rates, cpus []float64, rssKB int64, pages int) []PeerRun {
	var out []PeerRun
	for i := range rates {
		out = append(out, PeerRun{Tool: tool, PagesPerSec: rates[i], CPUPerPage: cpus[i], MaxRSSKB: rssKB + int64(i),
			Traffic: Traffic{PageRequests: pages, DistinctPages: pages}, LeadIn: time.Duration(i+1) * time.Millisecond})
	}
	return out
}

func figureOf(t *testing.T, s *Section, name string) Figure {
	t.Helper()
	for _, f := range s.Figures {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("section %s has no figure %q", s.Name, name)
	return Figure{}
}

func TestPeersFiguresAreMediansHeldToTheTargets(t *testing.T) {
	site := Size{2, 5}
	p := &PeersResult{Site: site, Workers: 32, HostConcurrency: 4, CeilingRates: []float64{900, 1000, 1100}}
	p.Runs = append(peerRuns(ToolWget2, []float64{90, 100, 300}, []float64{10, 12, 14}, 1000, 10),
		peerRuns(ToolBreakwater, []float64{170, 160, 150}, []float64{13, 11, 20}, 2000, 10)...)
	rep := &Report{Peers: p}
	secs := rep.Sections()
	if len(secs) != 1 || secs[0].Name != SectionPeers {
		t.Fatalf("sections %+v, want peers alone", secs)
	}
	s := &secs[0]
	for _, c := range []struct {
		name    string
		value   float64
		verdict string
	}{
		{"wget2: distinct pages/s", 100, ""},
		{"breakwater: distinct pages/s", 160, ""},
		{"breakwater: CPU µs per page", 13, ""},
		{"breakwater over wget2: pages/s", 1.6, Met},
		{"breakwater over wget2: CPU per page", 13.0 / 12, Missed},
		{"breakwater: ratio to ceiling", 0.16, Missed},
		{"wget2: peak RSS", 1002 * 1024, ""},
		{"breakwater: distinct pages served", 10, Met},
	} {
		f := figureOf(t, s, c.name)
		if f.Value != c.value || f.Verdict != c.verdict {
			t.Errorf("%s = %v (%q), want %v (%q)", c.name, f.Value, f.Verdict, c.value, c.verdict)
		}
	}
	// A run that missed pages fails the check: the rates would not compare.
	p.Runs[4].Traffic.DistinctPages = 9
	s = &rep.Sections()[0]
	if f := figureOf(t, s, "breakwater: distinct pages served"); f.Verdict != Failed || f.Value != 9 {
		t.Errorf("a run of 9 of 10 pages: %+v, want FAILED at 9", f)
	}
}

func TestPeersSkippedSaysWhy(t *testing.T) {
	rep := &Report{Peers: &PeersResult{Site: Size{2, 5}, Skipped: "wget2 is not installed"}}
	s := rep.Sections()[0]
	if len(s.Figures) != 1 || !strings.Contains(s.Figures[0].Text, "wget2 is not installed") || s.Figures[0].Verdict != "" {
		t.Fatalf("skipped section %+v, want one note and no verdict", s)
	}
}
