package sitemap

import (
	"bufio"
	"compress/gzip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The sitemaps.org limits, per file, and the longest texts kept.
const (
	// DefaultMaxURLs is the most entries a sitemap or index may hold.
	DefaultMaxURLs = 50000
	// DefaultMaxBytes is the most uncompressed bytes a sitemap may have.
	DefaultMaxBytes int64 = 50 << 20
	// MaxLocBytes is the longest <loc> kept (the protocol asks for less
	// than 2,048 characters; this leaves room for escaped ones).
	MaxLocBytes = 4096
	// MaxLastmodBytes is the longest <lastmod> kept; a W3C datetime is 35 at most.
	MaxLastmodBytes = 64
)

// Errors that Read's errors wrap, for callers to branch on.
var (
	ErrOversized = errors.New("sitemap over the limits")
	ErrMalformed = errors.New("malformed sitemap")
)

// Kind is what a sitemap file lists.
type Kind int

const (
	// Unknown: the file was refused before its root element was read.
	Unknown Kind = iota
	// URLSet is a <urlset>: its entries are pages.
	URLSet
	// Index is a <sitemapindex>: its entries are other sitemaps.
	Index
)

func (k Kind) String() string {
	switch k {
	case URLSet:
		return "urlset"
	case Index:
		return "sitemapindex"
	}
	return "unknown"
}

// Entry is one <url> of a urlset or <sitemap> of an index.
type Entry struct {
	Loc     string // trimmed of white space, as written otherwise
	Lastmod string // as written, trimmed; "" if none
}

// Limits bound what Read accepts of one file. Zero fields take the
// defaults (DefaultMaxURLs, DefaultMaxBytes).
type Limits struct {
	MaxURLs  int
	MaxBytes int64 // uncompressed
}

func (l Limits) withDefaults() Limits {
	if l.MaxURLs <= 0 {
		l.MaxURLs = DefaultMaxURLs
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// Read reads one sitemap or sitemap index from r, gzipped or not, and calls
// fn with each of its entries in document order, at most lim.MaxURLs times.
// It returns the file's kind and the first error: fn's own (returned as
// is, and reading stops), or one wrapping ErrOversized or ErrMalformed.
func Read(r io.Reader, lim Limits, fn func(Entry) error) (Kind, error) {
	lim = lim.withDefaults()
	body, err := decompressed(r)
	if err != nil {
		return Unknown, err
	}
	capped := &capReader{r: body, left: lim.MaxBytes, limit: lim.MaxBytes}
	p := &parser{dec: xml.NewDecoder(capped), lim: lim, fn: fn}
	p.dec.Strict = true
	err = p.run()
	if capped.over {
		// Whatever the decoder made of the cut, the file was too long.
		err = capped.err()
	}
	return p.kind, err
}

// decompressed returns r's content, gunzipped when it starts with the gzip
// magic bytes.
func decompressed(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	magic, _ := br.Peek(2)
	if len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		return br, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("%w: gzip: %v", ErrMalformed, err)
	}
	return zr, nil
}

// capReader reads at most limit bytes of r and fails once r has more.
type capReader struct {
	r     io.Reader
	left  int64
	limit int64
	over  bool
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.over {
		return 0, c.err()
	}
	if c.left <= 0 {
		var one [1]byte
		n, err := io.ReadFull(c.r, one[:])
		if n > 0 {
			c.over = true
			return 0, c.err()
		}
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

func (c *capReader) err() error {
	return fmt.Errorf("%w: more than %d bytes uncompressed", ErrOversized, c.limit)
}

// parser walks the tokens. depth is the element depth: the root is 1, an
// entry (<url>, <sitemap>) 2, its <loc> and <lastmod> 3.
type parser struct {
	dec     *xml.Decoder
	lim     Limits
	fn      func(Entry) error
	kind    Kind
	depth   int
	entries int
	// The entry being read, and the text of its field being read.
	inEntry bool
	entry   Entry
	field   string // "loc", "lastmod" or ""
	text    strings.Builder
	tooLong bool
}

func (p *parser) run() error {
	for {
		tok, err := p.dec.Token()
		if err == io.EOF {
			if p.kind == Unknown {
				return fmt.Errorf("%w: no root element", ErrMalformed)
			}
			return nil
		}
		if err != nil {
			if errors.Is(err, ErrOversized) {
				return err
			}
			return fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if err := p.token(tok); err != nil {
			return err
		}
	}
}

func (p *parser) token(tok xml.Token) error {
	switch t := tok.(type) {
	case xml.StartElement:
		p.depth++
		return p.start(t.Name.Local)
	case xml.EndElement:
		p.depth--
		return p.end(t.Name.Local)
	case xml.CharData:
		if p.depth == 0 && len(strings.TrimSpace(string(t))) > 0 {
			return fmt.Errorf("%w: text outside the root element", ErrMalformed)
		}
		if p.field != "" && !p.tooLong {
			p.text.Write(t)
			p.tooLong = p.text.Len() > MaxLocBytes
		}
	}
	return nil
}

func (p *parser) start(name string) error {
	switch p.depth {
	case 1:
		if p.kind != Unknown {
			return fmt.Errorf("%w: a second root element <%s>", ErrMalformed, name)
		}
		switch name {
		case "urlset":
			p.kind = URLSet
		case "sitemapindex":
			p.kind = Index
		default:
			return fmt.Errorf("%w: root element <%s>, not <urlset> or <sitemapindex>", ErrMalformed, name)
		}
	case 2:
		p.inEntry = p.kind == URLSet && name == "url" || p.kind == Index && name == "sitemap"
		p.entry = Entry{}
	case 3:
		if p.inEntry && (name == "loc" || name == "lastmod") {
			p.field = name
			p.text.Reset()
			p.tooLong = false
		}
	}
	return nil
}

func (p *parser) end(name string) error {
	switch {
	case p.depth == 2 && p.field != "":
		p.endField()
	case p.depth == 1 && p.inEntry:
		p.inEntry = false
		if p.entry.Loc == "" {
			return nil
		}
		if p.entries++; p.entries > p.lim.MaxURLs {
			return fmt.Errorf("%w: more than %d entries", ErrOversized, p.lim.MaxURLs)
		}
		return p.fn(p.entry)
	}
	return nil
}

func (p *parser) endField() {
	v := strings.TrimSpace(p.text.String())
	switch {
	case p.field == "loc" && !p.tooLong:
		p.entry.Loc = v
	case p.field == "lastmod" && len(v) <= MaxLastmodBytes:
		p.entry.Lastmod = v
	}
	p.field = ""
	p.text.Reset()
}
