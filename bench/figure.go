package bench

import (
	"math"
	"strings"
	"time"
)

// Unit says what a figure's number counts; the renderer chooses how it
// prints from it.
type Unit string

const (
	PagesPerSec Unit = "pages/s"
	URLsPerSec  Unit = "URLs/s"
	Seconds     Unit = "s"
	Bytes       Unit = "bytes"      // printed in MB, 10^6 bytes
	PageBytes   Unit = "bytes/page" // printed in KB, 10^3 bytes
	EdgeBytes   Unit = "bytes/link" // printed in bytes, one decimal
	HostBytes   Unit = "bytes/host" // printed in bytes
	Share       Unit = "share"      // a ratio printed as a percentage
	Times       Unit = "times"      // a ratio printed as 2.50x
	Change      Unit = "change"     // a relative change printed as +12.5%
	Count       Unit = "count"
	PerPage     Unit = "per page"   // a count divided by pages, two decimals
	PerSecond   Unit = "per second" // a count divided by seconds, one decimal
	Text        Unit = "text"       // no number: Figure.Text says it
)

// Op is how a figure is held against its target.
type Op string

const (
	AtLeast Op = ">="
	AtMost  Op = "<="
	Below   Op = "<"
	Equal   Op = "="
	All     Op = "all"    // the figure equals its Of: every one of them
	Within  Op = "within" // |value| <= target, for a Change
)

// Target is what a figure should be.
type Target struct {
	Op    Op      `json:"op"`
	Value float64 `json:"value,omitempty"`
	// Check marks a correctness check rather than a performance goal: a
	// miss is FAILED in every configuration, never a hint.
	Check bool `json:"check,omitempty"`
}

// holds reports whether value meets the target; of is the figure's total.
func (t Target) holds(value, of float64) bool {
	switch t.Op {
	case AtLeast:
		return value >= t.Value
	case AtMost:
		return value <= t.Value
	case Below:
		return value < t.Value
	case Equal:
		return value == t.Value
	case All:
		return value == of
	case Within:
		return math.Abs(value) <= t.Value
	}
	return false
}

// Bound says how exact a figure is.
type Bound string

const (
	Exact    Bound = ""
	Lower    Bound = "lower"    // a run stopped at its cap: the true figure is at least this
	Estimate Bound = "estimate" // computed from measured figures, not measured
)

// Verdicts of a figure held against its target.
const (
	Met     = "met"
	Missed  = "MISSED"
	Unknown = "unknown" // a lower bound that cannot settle the target
	Failed  = "FAILED"  // a check missed: the result is wrong, not slow
)

// Figure is one measured figure: what it is, its value, what it should be
// and what it means. Figures are data; the report renders them.
type Figure struct {
	Section string  `json:"section"`
	Name    string  `json:"name"`
	Unit    Unit    `json:"unit"`
	Value   float64 `json:"value"`
	// Of is the whole a part is counted against ("1195 of 1200"); nil
	// when the figure is not a part.
	Of *float64 `json:"of,omitempty"`
	// Runs are the value in each pass when the figure is their median.
	Runs  []float64 `json:"runs,omitempty"`
	Bound Bound     `json:"bound,omitempty"`
	// Text is the figure when it is not a number (Unit Text), or a short
	// list the number stands for.
	Text    string  `json:"text,omitempty"`
	Target  *Target `json:"target,omitempty"`
	Verdict string  `json:"verdict,omitempty"` // filled by the report
	Meaning string  `json:"meaning,omitempty"` // one line: what the figure says
}

// num is a figure of value in unit.
func num[N int | int64 | float64](name string, unit Unit, value N, meaning string) Figure {
	return Figure{Name: name, Unit: unit, Value: float64(value), Meaning: meaning}
}

// text is a figure that is not a number.
func text(name, value, meaning string) Figure {
	return Figure{Name: name, Unit: Text, Text: value, Meaning: meaning}
}

// secsOf is a duration figure in seconds.
func secsOf(name string, d time.Duration, meaning string) Figure {
	return num(name, Seconds, d.Seconds(), meaning)
}

// want sets a performance target.
func (f Figure) want(op Op, value float64) Figure {
	f.Target = &Target{Op: op, Value: value}
	return f
}

// check sets a correctness target: a miss is FAILED.
func (f Figure) check(op Op, value float64) Figure {
	f.Target = &Target{Op: op, Value: value, Check: true}
	return f
}

// of makes the figure a part of total.
func (f Figure) of(total int64) Figure {
	t := float64(total)
	f.Of = &t
	return f
}

// lower marks the figure a lower bound when capped.
func (f Figure) lower(capped bool) Figure {
	if capped {
		f.Bound = Lower
	}
	return f
}

// over records each pass's value; the figure's value is their median.
func (f Figure) over(runs []float64) Figure {
	if len(runs) > 1 {
		f.Runs = runs
	}
	return f
}

// listing adds the short list a count stands for.
func (f Figure) listing(s string) Figure {
	f.Text = s
	return f
}

// verdict holds the figure against its target: "" without one. A quick
// run's sizes are a fraction of the full run's, so its performance
// verdicts are bracketed: they only hint.
func (f Figure) verdict(quick bool) string {
	t := f.Target
	if t == nil {
		return ""
	}
	var of float64
	if f.Of != nil {
		of = *f.Of
	}
	ok := t.holds(f.Value, of)
	v := Met
	switch {
	case !ok && t.Check:
		return Failed
	case f.Bound == Lower && ok && t.Op != AtLeast:
		v = Unknown // at least a value under a ceiling: the truth may be over it
	case f.Bound == Lower && !ok && t.Op == AtLeast:
		v = Unknown // at least a value short of a floor: the truth may reach it
	case !ok:
		v = Missed
	}
	if quick && !t.Check {
		return "(" + strings.ToLower(v) + ")"
	}
	return v
}
