package extract

import (
	"slices"
	"testing"
)

func TestSrcsetURLs(t *testing.T) {
	tests := []struct {
		name, srcset string
		want         []string
	}{
		{"one URL", "a.png", []string{"a.png"}},
		{"densities", "a.png 1x, b.png 2x", []string{"a.png", "b.png"}},
		{"widths, no space after comma", "a.png 300w,b.png 600w", []string{"a.png", "b.png"}},
		{"odd whitespace", "  a.png \t 1.5x  ,\n\tb.png\f2x\r\n", []string{"a.png", "b.png"}},
		{"comma inside a URL", "a.png,b.png 2x", []string{"a.png,b.png"}},
		{"comma at the end of a URL ends it", "a.png, b.png", []string{"a.png", "b.png"}},
		{"trailing commas", "a.png,,, b.png 2x,", []string{"a.png", "b.png"}},
		{"empty candidates", ", ,a.png ,, , b.png", []string{"a.png", "b.png"}},
		{"data URL with commas", "data:image/png;base64,iVBOR 1x, b.png 2x", []string{"data:image/png;base64,iVBOR", "b.png"}},
		{"query with commas", "/i?w=1,2&h=3 1x", []string{"/i?w=1,2&h=3"}},
		{"width and height", "a.png 100w 50h", []string{"a.png"}},
		{"exponent and leading dot", "a.png 1e1x, b.png .5x, c.png 0x", []string{"a.png", "b.png", "c.png"}},
		{"two densities dropped", "a.png 2x 3x, b.png", []string{"b.png"}},
		{"width and density dropped", "a.png 100w 2x, b.png", []string{"b.png"}},
		{"height alone dropped", "a.png 50h, b.png", []string{"b.png"}},
		{"height and density dropped", "a.png 2x 50h, b.png", []string{"b.png"}},
		{"unknown descriptor dropped", "a.png 2y, b.png big", nil},
		{"negative density dropped", "a.png -1x, b.png", []string{"b.png"}},
		{"zero width dropped", "a.png 0w, b.png 010w", []string{"b.png"}},
		{"malformed numbers dropped", "a.png 1.x, b.png 1.5.5x, c.png +1x, d.png 1e, e.png 1w1w", nil},
		{"parentheses hold commas", "a.png (x, y) 2x, b.png", []string{"b.png"}},
		{"unclosed parenthesis", "a.png 2x (, b.png", nil},
		{"empty", "", nil},
		{"only separators", " , \t,\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := srcsetURLs(tt.srcset); !slices.Equal(got, tt.want) {
				t.Errorf("srcsetURLs(%q) = %q, want %q", tt.srcset, got, tt.want)
			}
		})
	}
}
