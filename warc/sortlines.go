package warc

import (
	"bufio"
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"slices"

	"breakwater/spool"
)

// Lines are sorted and merged in bounded memory: a file's index is sorted
// as it grows in runs of at most sortRunBytes held in memory, the runs
// spilled to an unlinked temporary file, then merged; an archive's index
// merges the files' sorted indexes, mergeFanIn at a time, reading each
// through a buffer of mergeBuffer bytes. Memory follows neither the
// number of records nor that of files.
const (
	sortRunBytes = 4 << 20
	mergeFanIn   = 128
	mergeBuffer  = 32 << 10
)

// lineSorter sorts lines bytewise. Each line ends with "\n" and holds no
// other. It is not safe for concurrent use.
type lineSorter struct {
	dir    string // where runs spill ("" for the system's temporary directory)
	runMax int    // bytes of lines held before they are spilled as a run
	arena  []byte
	spans  []span
	runs   *spool.Buffer // sorted runs, one after the other; nil until the first
	ends   []int64       // where each run in runs ends
	lines  int64
}

type span struct{ from, to int }

func newLineSorter(dir string, runMax int) *lineSorter {
	if runMax <= 0 {
		runMax = sortRunBytes
	}
	return &lineSorter{dir: dir, runMax: runMax}
}

// add takes the lines in b, each ending with "\n".
func (s *lineSorter) add(b []byte) error {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return errors.New("index line without its end")
		}
		s.spans = append(s.spans, span{len(s.arena), len(s.arena) + i + 1})
		s.arena = append(s.arena, b[:i+1]...)
		s.lines++
		b = b[i+1:]
		if len(s.arena) >= s.runMax {
			if err := s.spill(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *lineSorter) sortSpans() {
	slices.SortFunc(s.spans, func(a, b span) int { return compareLines(s.arena[a.from:a.to], s.arena[b.from:b.to]) })
}

// spill writes the lines held, sorted, as the next run.
func (s *lineSorter) spill() error {
	if len(s.spans) == 0 {
		return nil
	}
	s.sortSpans()
	if s.runs == nil {
		s.runs = spool.New(s.dir, 1)
	}
	w := bufio.NewWriterSize(s.runs, mergeBuffer)
	for _, sp := range s.spans {
		w.Write(s.arena[sp.from:sp.to])
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("sort index lines: %w", err)
	}
	s.ends = append(s.ends, s.runs.Size())
	s.arena, s.spans = s.arena[:0], s.spans[:0]
	return nil
}

// writeTo writes every line added, sorted, to w.
func (s *lineSorter) writeTo(w io.Writer) error {
	if s.runs == nil {
		s.sortSpans()
		bw := bufio.NewWriterSize(w, mergeBuffer)
		for _, sp := range s.spans {
			bw.Write(s.arena[sp.from:sp.to])
		}
		return bw.Flush()
	}
	if err := s.spill(); err != nil {
		return err
	}
	inputs := make([]lineInput, len(s.ends))
	var from int64
	for i, end := range s.ends {
		inputs[i] = lineInput{name: fmt.Sprintf("run %d", i+1), r: io.NewSectionReader(s.runs, from, end-from)}
		from = end
	}
	_, err := mergeLines(w, inputs)
	return err
}

// close releases the runs' file.
func (s *lineSorter) close() {
	if s.runs != nil {
		s.runs.Close()
		s.runs = nil
	}
	s.arena, s.spans = nil, nil
}

// lineInput is one sorted input of a merge, named for errors.
type lineInput struct {
	name string
	r    io.Reader
}

// errUnsorted is wrapped by mergeLines' error for an input out of order.
var errUnsorted = errors.New("index lines out of order")

// mergeLines writes the lines of the sorted inputs to w, all in bytewise
// order, and returns how many. An input out of order is an error that
// names it: the merge would not be sorted. A last line without its "\n"
// is given one.
func mergeLines(w io.Writer, inputs []lineInput) (int64, error) {
	bw := bufio.NewWriterSize(w, mergeBuffer)
	h := make(mergeHeap, 0, len(inputs))
	for _, in := range inputs {
		c := &mergeCursor{lineInput: in, br: bufio.NewReaderSize(in.r, mergeBuffer)}
		ok, err := c.next()
		if err != nil {
			return 0, err
		}
		if ok {
			h = append(h, c)
		}
	}
	heap.Init(&h)
	var n int64
	for len(h) > 0 {
		c := h[0]
		if _, err := bw.Write(c.line); err != nil {
			return n, err
		}
		n++
		ok, err := c.next()
		if err != nil {
			return n, err
		}
		if ok {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	return n, bw.Flush()
}

type mergeCursor struct {
	lineInput
	br         *bufio.Reader
	line, prev []byte
	at         int64 // the line's number in its input
}

// next reads the cursor's next line, reporting false at the end.
func (c *mergeCursor) next() (bool, error) {
	c.prev, c.line = c.line, c.prev[:0]
	for {
		part, err := c.br.ReadSlice('\n')
		c.line = append(c.line, part...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			if len(c.line) == 0 {
				return false, nil
			}
			c.line = append(c.line, '\n')
		} else if err != nil {
			return false, fmt.Errorf("read %s: %w", c.name, err)
		}
		break
	}
	c.at++
	if c.at > 1 && compareLines(c.line, c.prev) < 0 {
		return false, fmt.Errorf("%s, line %d: %w", c.name, c.at, errUnsorted)
	}
	return true, nil
}

// compareLines orders lines as `LC_ALL=C sort` does: bytewise, their
// line ends left out.
func compareLines(a, b []byte) int {
	return bytes.Compare(bytes.TrimSuffix(a, []byte("\n")), bytes.TrimSuffix(b, []byte("\n")))
}

type mergeHeap []*mergeCursor

func (h mergeHeap) Len() int           { return len(h) }
func (h mergeHeap) Less(i, j int) bool { return compareLines(h[i].line, h[j].line) < 0 }
func (h mergeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)        { *h = append(*h, x.(*mergeCursor)) }
func (h *mergeHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}
