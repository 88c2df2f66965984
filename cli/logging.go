package cli

import (
	"io"
	"log/slog"
	"os"

	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// logFlags are the logging flags every long-running command takes.
type logFlags struct {
	format string
	level  string
}

func (l *logFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&l.format, "log-format", "auto", "log format: auto (text on a terminal, JSON otherwise), text or json")
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
}

// isJSON reports whether the logger l makes for w writes JSON.
func (l *logFlags) isJSON(w io.Writer) bool {
	switch l.format {
	case "json":
		return true
	case "auto":
		f, ok := w.(*os.File)
		return !ok || !term.IsTerminal(int(f.Fd()))
	}
	return false
}

func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) { return l.loggerTo(w, w) }

// loggerTo builds the logger writing to w, in the format auto picks for
// terminal (the stream w ends up on).
func (l *logFlags) loggerTo(w, terminal io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "auto":
		if !l.isJSON(terminal) {
			return slog.New(slog.NewTextHandler(w, opts)), nil
		}
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("--log-format %q: want auto, text or json", l.format)
}
