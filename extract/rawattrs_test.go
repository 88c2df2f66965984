package extract

import (
	"fmt"
	"testing"

	"golang.org/x/net/html"
)

// sameAttrs fails unless rawAttrs, wherever it reads a start tag of src,
// gives the tokenizer's own attributes (the first of each key, in order).
func sameAttrs(t *testing.T, src []byte) {
	t.Helper()
	eachTagTwice(t, src, func(tt html.TokenType, ours, theirs *html.Tokenizer) {
		if tt == html.EndTagToken {
			return
		}
		var got []string
		seen := map[string]bool{}
		ok := rawAttrs(ours.Raw(), func(key, val []byte) {
			k := string(key) // lower case already, up to 32 bytes
			if len(key) > 32 {
				k = asciiLower(key)
			}
			if !seen[k] {
				seen[k] = true
				got = append(got, fmt.Sprintf("%s=%q", k, val))
			}
		})
		var want []string
		theirs.TagName()
		for more := true; more; {
			var key, val []byte
			key, val, more = theirs.TagAttr()
			if key != nil {
				want = append(want, fmt.Sprintf("%s=%q", key, val))
			}
		}
		if ok && fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("tag %q: attributes %v, the tokenizer's %v", ours.Raw(), got, want)
		}
	})
}

func TestRawAttrsAsTheTokenizers(t *testing.T) {
	for _, src := range []string{
		`<a href="/x" HREF='/y' class=c id = d data-x>t</a><img src=a.png alt="">`,
		`<a/ href=z><a / href = "q" / ><br/><p a=/><p a=b/>`,
		`<div =x y=><a href=>x</a><a href='unterminated>`,
		`<link rel=stylesheet href="a b.css"><script src=x.js async></script>`,
		`<a href="x?a=1&amp;b=2">entity: TagAttr reads it</a><a hRef=x>`,
		"<a\thref=\"t\"\nclass=\fx>",
		`<a href="a"b="c">`, `<a href='a'"b'>`, `<a ===x>`, `<a x='1' x=2 X=3>`,
	} {
		sameAttrs(t, []byte(src))
	}
}

func FuzzRawAttrs(f *testing.F) {
	f.Add([]byte(`<a href="/x" HREF='/y' class=c id = d data-x>t</a><img src=a.png alt="">`))
	f.Add([]byte(`<a/ href=z><a / href = "q" / ><p a=/>`))
	f.Add([]byte(`<div =x y=><a href=>x</a>`))
	f.Fuzz(func(t *testing.T, src []byte) { sameAttrs(t, src) })
}

// asciiLower lowers A-Z only, as the tokenizer does.
func asciiLower(b []byte) string {
	out := []byte(string(b))
	for i, c := range out {
		if 'A' <= c && c <= 'Z' {
			out[i] = c + 'a' - 'A'
		}
	}
	return string(out)
}
