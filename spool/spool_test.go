package spool

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"testing"
)

// Whatever the sizes of the writes, the bytes read back are those written,
// through ReadAt at any offset, Reader, Bytes and WriteTo; past memMax they
// are in a file nobody else can see, and Close releases it.
func TestBufferKeepsWhatIsWritten(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, total := range []int{0, 1, 99, 100, 101, 1000, 10000} {
		want := make([]byte, total)
		for i := range want {
			want[i] = byte(rng.IntN(256))
		}
		b := New(dir, 100)
		for rest := want; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(300))
			if w, err := b.Write(rest[:n]); err != nil || w != n {
				t.Fatalf("Write(%d) = %d, %v", n, w, err)
			}
			rest = rest[n:]
		}
		if b.Size() != int64(total) || b.Spilled() != (total > 100) {
			t.Errorf("%d bytes: size %d, spilled %v", total, b.Size(), b.Spilled())
		}
		got, err := b.Bytes()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: Bytes() differ (%v)", total, err)
		}
		if got, _ := io.ReadAll(b.Reader()); !bytes.Equal(got, want) {
			t.Errorf("%d bytes: Reader differs", total)
		}
		var out bytes.Buffer
		if n, err := b.WriteTo(&out); err != nil || n != int64(total) || !bytes.Equal(out.Bytes(), want) {
			t.Errorf("%d bytes: WriteTo = %d, %v", total, n, err)
		}
		for range 20 {
			if total == 0 {
				break
			}
			off := rng.IntN(total)
			p := make([]byte, rng.IntN(total-off)+1)
			if n, err := b.ReadAt(p, int64(off)); n != len(p) || (err != nil && err != io.EOF) || !bytes.Equal(p, want[off:off+len(p)]) {
				t.Fatalf("%d bytes: ReadAt(%d, %d) = %d, %v", total, len(p), off, n, err)
			}
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%d bytes: the spool left %d names in its directory", total, len(entries))
		}
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

func TestBufferReportsAnUnusableDirectory(t *testing.T) {
	b := New("/nonexistent/spool/dir", 4)
	if _, err := b.Write([]byte("0123456789")); err == nil {
		t.Fatal("Write past memMax into a missing directory succeeded")
	}
	if _, err := b.Write([]byte("x")); err == nil {
		t.Fatal("a Buffer that failed accepts more")
	}
}
