package bench

import "testing"

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
		figs := warcRatioFigures([]WARCRatio{w})
		if len(figs) != 2 {
			t.Fatalf("%d figures, want 2", len(figs))
		}
		if got := figs[0].Value >= TargetWARCToCrawl; got != c.met {
			t.Errorf("ratios %v: judged met=%v, want %v", c.ratios, got, c.met)
		}
	}
	if c := []float64{0.9, 0.5}; median(c) != 0.9 || c[0] != 0.9 {
		t.Errorf("median sorted its input or chose wrongly: %v", c)
	}
}
