package cli

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"breakwater/control"
	"breakwater/frontier"
	"breakwater/store"
)

// LinkColumns are export --links's and --inlinks's columns, in order: the
// link, then the status of the page holding it and of its target (0 and
// no error class: not fetched, or not yet).
var LinkColumns = []string{"from", "to", "kind", "rel", "text", "element", "attr",
	"from_status", "from_error_class", "to_status", "to_error_class"}

// linkRow is one line of a links export.
type linkRow struct {
	From           string         `json:"from"`
	To             string         `json:"to"`
	Kind           store.LinkKind `json:"kind"`
	Rel            []string       `json:"rel,omitempty"`
	Text           string         `json:"text,omitempty"`
	Element        string         `json:"element,omitempty"`
	Attr           string         `json:"attr,omitempty"`
	FromStatus     int            `json:"from_status"`
	FromErrorClass string         `json:"from_error_class,omitempty"`
	ToStatus       int            `json:"to_status"`
	ToErrorClass   string         `json:"to_error_class,omitempty"`
}

// exportLinks writes the link graph (every link, or those to inlinksOf)
// joined with the results' statuses.
func exportLinks(a control.API, format, inlinksOf string, stdout io.Writer) error {
	statuses, err := readStatuses(a)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(stdout, 64<<10)
	write, flush, err := linkWriter(w, format)
	if err != nil {
		return err
	}
	row := func(e store.Edge) error {
		r := linkRow{From: e.From, To: e.To, Kind: e.Kind, Rel: e.Rel.Names(), Text: e.Text, Element: e.Element, Attr: e.Attr}
		r.FromStatus, r.FromErrorClass = statuses.of(e.From)
		r.ToStatus, r.ToErrorClass = statuses.of(e.To)
		return write(&r)
	}
	if inlinksOf != "" {
		err = a.Inlinks(inlinksOf, row)
	} else {
		err = a.Edges(row)
	}
	if err != nil {
		return err
	}
	return flush()
}

func linkWriter(w *bufio.Writer, format string) (write func(*linkRow) error, flush func() error, err error) {
	switch format {
	case "jsonl":
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return func(r *linkRow) error { return enc.Encode(r) }, w.Flush, nil
	case "csv":
	default:
		return nil, nil, usagef("--format %q: want jsonl or csv", format)
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(LinkColumns); err != nil {
		return nil, nil, fmt.Errorf("csv header: %w", err)
	}
	cells := make([]string, len(LinkColumns))
	write = func(r *linkRow) error {
		copy(cells, []string{defuseFormula(r.From), defuseFormula(r.To), r.Kind.String(), strings.Join(r.Rel, " "),
			defuseFormula(r.Text), defuseFormula(r.Element), defuseFormula(r.Attr),
			strconv.Itoa(r.FromStatus), r.FromErrorClass, strconv.Itoa(r.ToStatus), r.ToErrorClass})
		return cw.Write(cells)
	}
	return write, csvFlush(cw, w), nil
}

// statusIndex holds each result's status and error class by the hash of
// its URL's canonical form, sorted by hash: 24 bytes a result (the hash,
// the status, an index into the error classes, which are few), not the
// results themselves, so that a crawl of millions of URLs joins in tens
// of megabytes.
type statusIndex struct {
	entries []statusEntry
	classes []string // classes[0] is "": a page
}

type statusEntry struct {
	hash   store.Hash
	status int32
	class  uint16
}

func readStatuses(a control.API) (*statusIndex, error) {
	idx := &statusIndex{classes: []string{""}}
	err := a.Results(false, func(r *store.Result) error {
		canonical, err := frontier.Canonicalize(r.URL)
		if err != nil {
			return nil // a result under a URL no link can name
		}
		class := slices.Index(idx.classes, r.ErrorClass)
		if class < 0 {
			class = len(idx.classes)
			idx.classes = append(idx.classes, r.ErrorClass)
		}
		idx.entries = append(idx.entries, statusEntry{hash: store.HashOf(canonical), status: int32(r.Status), class: uint16(class)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the results' statuses: %w", err)
	}
	slices.SortFunc(idx.entries, func(a, b statusEntry) int { return bytes.Compare(a.hash[:], b.hash[:]) })
	return idx, nil
}

// of returns the status and error class of url's result; 0 and "" when
// it has none.
func (s *statusIndex) of(url string) (int, string) {
	canonical, err := frontier.Canonicalize(url)
	if err != nil {
		return 0, ""
	}
	h := store.HashOf(canonical)
	i, ok := slices.BinarySearchFunc(s.entries, h, func(e statusEntry, h store.Hash) int { return bytes.Compare(e.hash[:], h[:]) })
	if !ok {
		return 0, ""
	}
	return int(s.entries[i].status), s.classes[s.entries[i].class]
}
