package demosite

import (
	"bytes"
	"image/png"
	"testing"
)

func TestTinyPNGDecodes(t *testing.T) {
	img, err := png.Decode(bytes.NewReader(tinyPNG))
	if err != nil {
		t.Fatalf("tinyPNG does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1 || b.Dy() != 1 {
		t.Fatalf("tinyPNG is %v, want 1x1", b)
	}
}
