// Package spool keeps bytes that must be had whole before they can be
// used, such as a WARC record's block (its length and digest come first),
// without holding them all in memory: the first MemMax bytes stay in
// memory, the rest go to a temporary file that is unlinked as soon as it
// is made, so that a crash leaves nothing behind. A page of a few hundred
// KiB never touches the disk; a 100 MB one costs MemMax of memory.
package spool

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// DefaultMemMax is the memory a Buffer uses before it spills to a file.
const DefaultMemMax = 256 << 10

// Buffer is written once, then read any number of times. It is not safe
// for concurrent writes; reads (ReadAt) may be concurrent once writing is
// done. Close releases its file.
type Buffer struct {
	dir    string
	memMax int
	mem    []byte
	file   *os.File // nil until the bytes outgrow mem
	size   int64
	err    error // the first write failure: later writes fail with it
	pooled bool  // mem came from slabs and goes back on Close
}

// slabs recycles the memory of closed Buffers: a crawl makes two Buffers a
// page (the raw answer and its records), and growing each from nothing
// cost more than compressing it. Only slabs up to slabMax are kept, so the
// pool holds about what the workers in flight use.
var slabs = sync.Pool{}

const slabMax = 64 << 10

// New returns an empty Buffer spilling to a file in dir ("" means the
// system's temporary directory) past memMax bytes (0: DefaultMemMax).
func New(dir string, memMax int) *Buffer {
	if memMax <= 0 {
		memMax = DefaultMemMax
	}
	b := &Buffer{dir: dir, memMax: memMax}
	if s, ok := slabs.Get().(*[]byte); ok {
		b.mem, b.pooled = (*s)[:0], true
	}
	return b
}

// Of returns a Buffer holding b in memory, for bytes already at hand.
func Of(b []byte) *Buffer {
	return &Buffer{memMax: len(b), mem: b, size: int64(len(b))}
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n := 0
	if room := b.memMax - len(b.mem); room > 0 && b.file == nil {
		n = min(room, len(p))
		if b.mem == nil {
			b.pooled = true // grown here, so ours to recycle
		}
		b.mem = append(b.mem, p[:n]...)
		b.size += int64(n)
		p = p[n:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if b.file == nil {
		if b.err = b.spill(); b.err != nil {
			return n, b.err
		}
	}
	m, err := b.file.Write(p)
	b.size += int64(m)
	if err != nil {
		b.err = fmt.Errorf("spool to %s: %w", b.file.Name(), err)
	}
	return n + m, b.err
}

// spill makes the file, unlinked at once: it lives as long as the Buffer.
// os.CreateTemp makes it 0600: it holds a response, maybe a logged-in page.
func (b *Buffer) spill() error {
	f, err := os.CreateTemp(b.dir, ".breakwater-spool-*")
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return fmt.Errorf("spool: unlink %s: %w", f.Name(), err)
	}
	b.file = f
	return nil
}

// Size is the number of bytes written.
func (b *Buffer) Size() int64 { return b.size }

// Spilled reports whether part of the bytes are in a file.
func (b *Buffer) Spilled() bool { return b.file != nil }

// ReadAt reads len(p) bytes from off, as io.ReaderAt says.
func (b *Buffer) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("spool: negative offset")
	}
	n := 0
	if off < int64(len(b.mem)) {
		n = copy(p, b.mem[off:])
		off += int64(n)
		p = p[n:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if b.file == nil || off >= b.size {
		return n, io.EOF
	}
	m, err := b.file.ReadAt(p, off-int64(len(b.mem)))
	return n + m, err
}

// Reader returns a reader of the bytes from the start.
func (b *Buffer) Reader() io.Reader { return io.NewSectionReader(b, 0, b.size) }

// Bytes returns every byte in one slice, reading the file if there is one:
// for small buffers and tests. The slice is valid until Close.
func (b *Buffer) Bytes() ([]byte, error) {
	if b.file == nil {
		return b.mem, nil
	}
	var out bytes.Buffer
	out.Grow(int(b.size))
	_, err := out.ReadFrom(b.Reader())
	return out.Bytes(), err
}

// WriteTo copies the bytes to w.
func (b *Buffer) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b.mem)
	if err != nil || b.file == nil {
		return int64(n), err
	}
	m, err := io.Copy(w, io.NewSectionReader(b.file, 0, b.size-int64(len(b.mem))))
	return int64(n) + m, err
}

// Close releases the file, if any. The Buffer must not be used after.
func (b *Buffer) Close() error {
	if b.pooled && cap(b.mem) <= slabMax {
		mem := b.mem[:0]
		slabs.Put(&mem)
	}
	b.mem, b.pooled = nil, false
	if b.file == nil {
		return nil
	}
	err := b.file.Close()
	b.file = nil
	return err
}
