package warc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// sortedC is lines sorted as `LC_ALL=C sort` sorts them.
func sortedC(lines []string) string {
	s := slices.Clone(lines)
	slices.Sort(s)
	var b strings.Builder
	for _, l := range s {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// lineGen makes lines of a small alphabet, so that many share prefixes,
// with bytes on either side of "\n" and of " ".
func lineGen() *rapid.Generator[string] {
	return rapid.StringOfN(rapid.SampledFrom([]rune{'\t', ' ', '!', 'a', 'b', '{', '}', 'é'}), 0, 12, -1)
}

// The sorter sorts what it is given, whatever the size of its runs.
func TestLineSorterSorts(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lines := rapid.SliceOf(lineGen()).Draw(t, "lines")
		run := rapid.IntRange(1, 64).Draw(t, "run bytes")
		s := newLineSorter("", run)
		defer s.close()
		for _, l := range lines {
			if err := s.add([]byte(l + "\n")); err != nil {
				t.Fatal(err)
			}
		}
		var out bytes.Buffer
		if err := s.writeTo(&out); err != nil {
			t.Fatal(err)
		}
		if want := sortedC(lines); out.String() != want {
			t.Fatalf("sorted in runs of %d bytes:\n%q\nwant\n%q", run, out.String(), want)
		}
	})
}

// A merge of sorted inputs is their lines, sorted; past mergeFanIn inputs
// they are merged in rounds.
func TestMergeManySorts(t *testing.T) {
	dir := t.TempDir()
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.SampledFrom([]int{0, 1, 3, mergeFanIn + 1, 2*mergeFanIn + 5}).Draw(t, "inputs")
		var all []string
		inputs := make([]lineInput, n)
		for i := range inputs {
			lines := rapid.SliceOfN(lineGen(), 0, 4).Draw(t, fmt.Sprint("input ", i))
			all = append(all, lines...)
			inputs[i] = lineInput{name: fmt.Sprint("input ", i), r: strings.NewReader(sortedC(lines))}
		}
		var out bytes.Buffer
		got, err := mergeMany(&out, inputs, dir)
		if err != nil {
			t.Fatal(err)
		}
		if want := sortedC(all); out.String() != want || got != int64(len(all)) {
			t.Fatalf("merged %d lines:\n%q\nwant %d:\n%q", got, out.String(), len(all), want)
		}
	})
}

// An input out of order is named: its lines cannot be merged in order. A
// last line without its line end is given one.
func TestMergeLinesNamesAnUnsortedInput(t *testing.T) {
	_, err := mergeLines(io.Discard, []lineInput{
		{name: "good.cdxj", r: strings.NewReader("a\nc\n")},
		{name: "bad.cdxj", r: strings.NewReader("b\nd\nc\n")},
	})
	if !errors.Is(err, errUnsorted) || !strings.Contains(err.Error(), "bad.cdxj, line 3") {
		t.Errorf("merge of an unsorted input: %v", err)
	}
	var out bytes.Buffer
	if _, err := mergeLines(&out, []lineInput{{name: "x", r: strings.NewReader("b\na b")}}); err == nil {
		t.Errorf("merged %q without noticing the order", out.String())
	}
	out.Reset()
	if _, err := mergeLines(&out, []lineInput{{name: "x", r: strings.NewReader("a\nb")}}); err != nil || out.String() != "a\nb\n" {
		t.Errorf("merge of a file without its last line end: %q, %v", out.String(), err)
	}
}
