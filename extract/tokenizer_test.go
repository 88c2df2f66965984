package extract

import (
	"bytes"
	"io"
	"testing"

	"golang.org/x/net/html"
)

// chunkedReader returns src in chunks whose sizes cycle through sizes, an
// empty read now and then among them, so a token is cut at every place.
type chunkedReader struct {
	src   []byte
	sizes []byte
	n     int
}

func (r *chunkedReader) Read(p []byte) (int, error) {
	if len(r.src) == 0 {
		return 0, io.EOF
	}
	size := 1 + len(r.src)
	if len(r.sizes) > 0 {
		size = int(r.sizes[r.n%len(r.sizes)])
	}
	r.n++
	size = min(size, len(p), len(r.src))
	n := copy(p, r.src[:size])
	r.src = r.src[n:]
	return n, nil
}

// ourKind is x/net's token type as the tokenizer names it.
func ourKind(tt html.TokenType) tokenKind {
	switch tt {
	case html.TextToken:
		return textToken
	case html.StartTagToken, html.SelfClosingTagToken:
		return startTagToken
	case html.EndTagToken:
		return endTagToken
	case html.CommentToken, html.DoctypeToken:
		return commentToken
	}
	return errorToken
}

// sameTokens fails unless the tokenizer reads src, in chunks of sizes,
// into x/net's tokens: the same kinds, raw bytes and text, and the same
// end. Under a cap (maxBuf > 0), a token the cap cuts short (text or a
// comment, which x/net returns before it stops) may differ in where its
// raw bytes end: x/net counts every read that failed on the cap.
func sameTokens(t *testing.T, src, sizes []byte, maxBuf int) {
	t.Helper()
	theirs := html.NewTokenizer(&chunkedReader{src: src, sizes: sizes})
	if maxBuf > 0 {
		theirs.SetMaxBuf(maxBuf)
	}
	var ours tokenizer
	ours.reset(&chunkedReader{src: src, sizes: sizes}, maxBuf)
	for n := 0; ; n++ {
		tt, kind := theirs.Next(), ours.Next()
		if ourKind(tt) != kind {
			t.Fatalf("token %d: kind %d, x/net's %v (%q; ours %q, err %v)", n, kind, tt, theirs.Raw(), ours.Raw(), theirs.Err())
		}
		if kind == errorToken {
			// Past its cap x/net may take the reader's error for its own.
			if ours.Err() != theirs.Err() && !(ours.Err() == errTokenTooLong && (theirs.Err() == html.ErrBufferExceeded || theirs.Err() == io.EOF)) {
				t.Fatalf("ended with %v, x/net with %v", ours.Err(), theirs.Err())
			}
			return
		}
		if ours.Err() == errTokenTooLong {
			continue // the token the cap cut: its end is x/net's count of failed reads
		}
		if !bytes.Equal(ours.Raw(), theirs.Raw()) {
			t.Fatalf("token %d (%v): raw %q, x/net's %q", n, tt, ours.Raw(), theirs.Raw())
		}
		if kind == textToken {
			if a, b := ours.Text(), theirs.Text(); !bytes.Equal(a, b) {
				t.Fatalf("token %d: text %q, x/net's %q", n, a, b)
			}
		}
	}
}

// tokenizerCases are the tokenizer's states and their edges.
var tokenizerCases = []string{
	``,
	`plain text`,
	`<!DOCTYPE html><html lang="en"><head><title>T &amp; U</title></head><body><p class=x>a &lt; b</p></body></html>`,
	`a < b <3 <<a href=x>y</a> <= </ x> </> <? pi ?> <!bogus> <!> <!-> <!-x>`,
	`<a href="x>y" title='a"b' data=c/ d e = f g=>z</a><br/><img src=i/><p/ >`,
	`<a =b ==c href = 'q' HREF=r>`,
	"<!-- a -- b --><!---->x<!-->y<!--->z<!-- --!>w<!-- --!x -->v<!----!-->u",
	"<script>if (a<b) x = '</scr' + 'ipt>'; </script><script></SCRIPT >after",
	"<script><!-- <script> </script> still --></script>after",
	"<script><!--<script>x</script>-->y</script>after<script><!--x--></script>",
	"<script><!-- -></script>z<script><!-- --!-></script>q<script><!--<scrip>t</script>r",
	"<script><!--<SCRIPT/></script><-</script>s<script><!--<scriptx>a</script>t",
	"<style>a{b:url(x)}</style><style></style><title>a<b>&amp;</title ><textarea>&lt;x</textarea/>",
	"<xmp><a></xmp><iframe><b></iframe><noscript><i></noscript><noembed><u></noembed ><noframes>x</noframes\t>",
	"<title>a</titlex>b</title>c<style>x</styl</style>",
	"<plaintext><a>b</plaintext>c",
	"line\r\nbreaks\rhere<a\r\nhref=x>\r</a><script>\r\n</script>",
	"nul\x00s<script>a\x00b</script><title>\x00</title><a\x00b href=\"x\x00\">",
	"entities &amp &amp; &#65; &#x42; &notit; &notin; &copy <title>&lt;&gt</title>",
	"<a href=x", "<a href='x", "<a href=", "<a ", "</a", "</", "<", "<!", "<!-", "<!--", "<!--x-", "<!--x--!",
	"<!DOCTYPE", "<!DOCT", "<script>x", "<script><!--", "<script><!--<script>", "<title>x</ti", "text<",
	"<svg><![CDATA[<a href=x>]]></svg>",
	"\ufeff<p>bom</p>",
}

func TestTokenizerAsXNet(t *testing.T) {
	for _, src := range tokenizerCases {
		for _, sizes := range [][]byte{nil, {1}, {2, 3}, {7, 0, 1}, {64}} {
			sameTokens(t, []byte(src), sizes, 0)
		}
	}
}

// TestTokenizerCap reads tokens longer than a cap: they end the tokens,
// with x/net's error, where x/net ends them.
func TestTokenizerCap(t *testing.T) {
	for _, src := range tokenizerCases {
		for _, maxBuf := range []int{2, 3, 5, 8, 13, 40} {
			for _, sizes := range [][]byte{nil, {1}, {3, 0}} {
				sameTokens(t, []byte(src), sizes, maxBuf)
			}
		}
	}
}

// TestTokenizerWindowGrows reads a token larger than the first window,
// cut across many reads, and a page of many windows.
func TestTokenizerWindowGrows(t *testing.T) {
	long := `<a title="` + string(bytes.Repeat([]byte("x>y "), 10_000)) + `" href=z>t</a>`
	sameTokens(t, []byte(long), []byte{200, 7}, 0)
	sameTokens(t, []byte(long), nil, 0)
	page := bytes.Repeat([]byte("<li><a href=\"/p/1\">one</a> text &amp; more</li>\n<!-- c -->"), 2_000)
	sameTokens(t, page, []byte{100, 255, 1}, 0)
}

func FuzzTokenizer(f *testing.F) {
	for _, src := range tokenizerCases {
		f.Add([]byte(src), []byte{3, 1}, uint8(0))
	}
	f.Add([]byte("<a href=x>y</a>"), []byte{1}, uint8(4))
	f.Fuzz(func(t *testing.T, src, sizes []byte, maxBuf uint8) {
		limit := 0
		if maxBuf > 1 {
			limit = int(maxBuf)
		}
		sameTokens(t, src, sizes, limit)
	})
}
