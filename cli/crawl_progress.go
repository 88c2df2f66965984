package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"breakwater/crawl"
)

// progressShown decides --progress: auto shows the line when stderr is a
// terminal.
func progressShown(mode string, stderr io.Writer) (bool, error) {
	switch mode {
	case "always":
		return true, nil
	case "never":
		return false, nil
	case "auto":
		f, ok := stderr.(*os.File)
		return ok && term.IsTerminal(int(f.Fd())), nil
	}
	return false, usagef("--progress %q: want auto, always or never", mode)
}

// lineWriter shares stderr between the progress line and the log: a log
// line first erases the progress line, which the next redraw brings back,
// so the two never mix on one line.
type lineWriter struct {
	mu     sync.Mutex
	w      io.Writer
	drawn  bool
	closed bool // the bar is stopped: a late redraw of its own is dropped
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.drawn {
		io.WriteString(l.w, "\r\033[2K")
		l.drawn = false
	}
	return l.w.Write(p)
}

// bar is the progress bar's side of the lineWriter.
type barSide struct{ l *lineWriter }

func (b barSide) Write(p []byte) (int, error) {
	b.l.mu.Lock()
	defer b.l.mu.Unlock()
	if b.l.closed {
		return len(p), nil
	}
	b.l.drawn = true
	return b.l.w.Write(p)
}

// showProgress redraws the progress line every interval until stop, which
// erases it.
func showProgress(l *lineWriter, engine *crawl.Engine, maxPages int, every time.Duration) (stop func()) {
	max := int64(-1) // a spinner: no bound, no ETA
	if maxPages > 0 {
		max = int64(maxPages)
	}
	bar := progressbar.NewOptions64(max, progressbar.OptionSetWriter(barSide{l}), progressbar.OptionUseANSICodes(true),
		progressbar.OptionSetPredictTime(maxPages > 0), progressbar.OptionSetElapsedTime(false),
		progressbar.OptionShowCount(), progressbar.OptionSetWidth(20), progressbar.OptionThrottle(0),
		progressbar.OptionSpinnerType(14))
	quit, done := make(chan struct{}), make(chan struct{})
	draw := func() {
		p := engine.Progress()
		bar.Describe(progressText(p))
		n := p.Fetched + p.Failed
		if maxPages > 0 {
			n = p.Started
		}
		bar.Set64(n)
	}
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			draw()
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		// The spinner redraws on a goroutine of its own: the line is
		// erased and the bar cut off in one step, so no redraw follows.
		l.mu.Lock()
		if l.drawn {
			io.WriteString(l.w, "\r\033[2K")
		}
		l.drawn, l.closed = false, true
		l.mu.Unlock()
		bar.Finish() // ends the spinner's goroutine; what it draws is dropped
	}
}

// progressText is the line's words: the figures, or what the crawl waits
// for when only waiting work is left.
func progressText(p crawl.Progress) string {
	var b strings.Builder
	rate := 0.0
	if p.Elapsed > 0 {
		rate = float64(p.Fetched) / p.Elapsed.Seconds()
	}
	fmt.Fprintf(&b, "fetched %d (%.0f/s), queued %d, deferred %d, failed %d", p.Fetched, rate, p.Queued, p.Deferred, p.Failed)
	if p.Open+p.HalfOpen+p.Paused+p.Cases > 0 {
		fmt.Fprintf(&b, "; hosts open %d, half-open %d, paused %d, case %d", p.Open, p.HalfOpen, p.Paused, p.Cases)
	}
	fmt.Fprintf(&b, "; %s", p.Elapsed.Round(time.Second))
	if lf := p.LocalFault; lf != nil {
		fmt.Fprintf(&b, " | PAUSED: local fault suspected, %d of %d hosts failing at once; probing %d hosts, next in %s",
			lf.FailingHosts, lf.ActiveHosts, len(lf.Probing), max(time.Until(lf.NextProbe), 0).Round(time.Second))
		return b.String()
	}
	if p.InFlight == 0 && p.Queued+p.Deferred > 0 && p.Open > 0 && p.NextProbe > 0 {
		fmt.Fprintf(&b, " | waiting on %d open hosts: next probe in %s, giving up in %s",
			p.Open, p.NextProbe.Round(time.Second), p.GiveUpIn.Round(time.Second))
	}
	return b.String()
}
