package userimport

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Bar draws an import's progress on a terminal: one line, redrawn in
// place at most every BarInterval, with the lines read, lines per second
// and, when the file's size is known, the share done and the time left.
type Bar struct {
	w     io.Writer
	size  int64
	now   func() time.Time
	start time.Time
	last  time.Time
	shown bool
}

// BarInterval is how often a Bar redraws at most.
const BarInterval = 200 * time.Millisecond

// NewBar starts a bar on w (a terminal) for a file of size bytes (0:
// unknown, as stdin's), timed by now (nil: time.Now).
func NewBar(w io.Writer, size int64, now func() time.Time) *Bar {
	if now == nil {
		now = time.Now
	}
	return &Bar{w: w, size: size, now: now, start: now()}
}

// Update redraws the bar with c, unless it did less than BarInterval ago.
func (b *Bar) Update(c Counts) {
	t := b.now()
	if b.shown && t.Sub(b.last) < BarInterval {
		return
	}
	b.last, b.shown = t, true
	elapsed := t.Sub(b.start)
	var line strings.Builder
	fmt.Fprintf(&line, "\r\x1b[2K%s lines", thousands(c.Line))
	if elapsed > 0 {
		fmt.Fprintf(&line, "  %s lines/s", thousands(int(float64(c.Line)/elapsed.Seconds())))
	}
	if b.size > 0 {
		done := min(float64(c.Bytes)/float64(b.size), 1)
		const width = 24
		full := int(done * width)
		fmt.Fprintf(&line, "  [%s%s] %3.0f%%", strings.Repeat("#", full), strings.Repeat("-", width-full), done*100)
		if done > 0 {
			left := time.Duration(float64(elapsed) * (1 - done) / done)
			fmt.Fprintf(&line, "  ETA %s", left.Round(time.Second))
		}
	}
	if c.Refused > 0 {
		fmt.Fprintf(&line, "  %s refused", thousands(c.Refused))
	}
	io.WriteString(b.w, line.String())
}

// Clear erases the bar, so that a message or the summary starts on a
// clean line; the next Update draws it again.
func (b *Bar) Clear() {
	if b.shown {
		io.WriteString(b.w, "\r\x1b[2K")
		b.shown = false
	}
}

// thousands writes n with comma separators: 1,000,000.
func thousands(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
