package bench

import (
	"strings"
	"testing"
)

func TestWARCRatioMedianAndVerdict(t *testing.T) {
	cases := []struct {
		ratios []float64
		median float64
		met    bool
	}{
		{[]float64{0.9, 0.5, 0.85}, 0.85, true},
		{[]float64{0.79, 0.95, 0.6}, 0.79, false},
		{[]float64{0.81}, 0.81, true},
		{nil, 0, false},
	}
	for _, c := range cases {
		w := WARCRatio{Ratios: c.ratios, CPURatios: c.ratios, PageBytes: WARCRatioPageBytes}
		if got := w.Median(); got != c.median {
			t.Errorf("Median(%v) = %v, want %v", c.ratios, got, c.median)
		}
		w.WARCBytes = []float64{2000, 1000, 3000}
		uncompressed := w
		uncompressed.Uncompressed = true
		figs := warcRatioFigures([]WARCRatio{w, uncompressed})
		if len(figs) != 6 {
			t.Fatalf("%d figures, want 3 a site", len(figs))
		}
		if got := figs[0].Value >= TargetWARCToCrawl; got != c.met || figs[0].Target == nil {
			t.Errorf("ratios %v: judged met=%v (target %v), want %v", c.ratios, got, figs[0].Target, c.met)
		}
		if figs[2].Value != 2000 {
			t.Errorf("WARC bytes a page %v, want the median pair's 2000", figs[2].Value)
		}
		if figs[3].Target != nil || !strings.Contains(figs[3].Name, "--warc-compression none") {
			t.Errorf("the uncompressed archive's ratio %q is judged against %v: the target is the default's", figs[3].Name, figs[3].Target)
		}
	}
	if c := []float64{0.9, 0.5}; median(c) != 0.9 || c[0] != 0.9 {
		t.Errorf("median sorted its input or chose wrongly: %v", c)
	}
}
