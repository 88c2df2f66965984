package extract

import (
	"bytes"
	"testing"

	"golang.org/x/net/html"
)

// eachTagTwice tokenizes src with two tokenizers in step and calls fn
// with both at every tag token: one for the code under test to read, the
// other for the tokenizer's own reading.
func eachTagTwice(t *testing.T, src []byte, fn func(tt html.TokenType, ours, theirs *html.Tokenizer)) {
	t.Helper()
	ours, theirs := html.NewTokenizer(bytes.NewReader(src)), html.NewTokenizer(bytes.NewReader(src))
	for {
		tt, tt2 := ours.Next(), theirs.Next()
		if tt != tt2 {
			t.Fatalf("the two tokenizers parted: %v and %v", tt, tt2)
		}
		switch tt {
		case html.ErrorToken:
			return
		case html.StartTagToken, html.SelfClosingTagToken, html.EndTagToken:
			fn(tt, ours, theirs)
		}
	}
}

// sameTagNames fails unless tagName gives each tag of src the tokenizer's
// own name, and says attributes may follow whenever the tokenizer has any.
func sameTagNames(t *testing.T, src []byte) {
	t.Helper()
	var buf []byte
	eachTagTwice(t, src, func(tt html.TokenType, ours, theirs *html.Tokenizer) {
		var name []byte
		var may bool
		name, may, buf = tagName(ours.Raw(), buf)
		want, has := theirs.TagName()
		if !bytes.Equal(name, want) {
			t.Fatalf("tag %q: name %q, the tokenizer's %q", ours.Raw(), name, want)
		}
		if has && !may && tt != html.EndTagToken {
			t.Fatalf("tag %q: said no attributes, the tokenizer has some", ours.Raw())
		}
	})
}

func TestTagNameAsTheTokenizers(t *testing.T) {
	for _, src := range []string{
		`<A HREF="x">a</A><br/><IMG src=y /><p class = "q">`,
		`<svg:rect x=1></svg:rect><my-el data-x>t</my-el ><div	id=d>`,
		"<a\x00b href=x>nul</a\x00b><\x00a>",
		`<script>if (a < b) document.write("</scr" + "ipt>")</script><style>a{}</style >`,
		`<textarea><a href=no></textarea><title>T <b></title>`,
		`<!-- <a href=c> --><!DOCTYPE html><![CDATA[x]]></ br><a/ href=z><a / >`,
		"<a\nhref=n>\n</a\n>",
	} {
		sameTagNames(t, []byte(src))
	}
}

func FuzzTagName(f *testing.F) {
	f.Add([]byte(`<A HREF="x">a</A><br/><IMG src=y /><p class = "q">`))
	f.Add([]byte("<a\x00b href=x>nul</a\x00b>"))
	f.Add([]byte(`<script>x</script><a/ b>`))
	f.Fuzz(func(t *testing.T, src []byte) { sameTagNames(t, src) })
}
