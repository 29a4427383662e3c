package simulate

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"
)

// textColumns is how many columns, at most, the text timeline uses for
// time.
const textColumns = 60

// levels draws a count as a bar from an eighth to a full block.
var levels = []rune(" ▁▂▃▄▅▆▇█")

// WriteText writes a compact timeline of r for a terminal: a title line,
// time labels at window edges, one row of admitted and one of denied
// requests (a column a slice of time, a block's height its count), a ruler
// marking the window edges, and a summary with the most requests admitted
// in any one period.
//
//	NAME 10/1m, traffic "edge"
//	          0s                            1m                            2m
//	admitted                               ██
//	denied
//	          |-----------------------------|-----------------------------|
//	20 requests: 20 admitted, 0 denied. Most admitted in one 1m: 20 (limit 10), at 1m.
//	A column is 2s; █ is 10 requests.
func WriteText(w io.Writer, r Result, title string) error {
	bw := bufio.NewWriter(w)
	width, bins := r.Bins(textColumns)
	most := 1
	for _, b := range bins {
		most = max(most, b.Admitted, b.Denied)
	}
	const margin = "          " // the width of "admitted  "
	period := r.Limit.Period

	// Window edges to mark: every one, or every few when they would touch.
	every := max(1, (2*width+period-1)/period)
	ruler := []rune(strings.Repeat("-", len(bins)+1))
	for k := time.Duration(0); k*period <= r.Span; k += every {
		ruler[int(k*period/width)] = '|'
	}
	// Labels at marked edges, at a stride that keeps them apart.
	var labels []rune
	for stride := every; labels == nil; stride += every {
		labels = edgeLabels(len(bins)+8, period, width, r.Span, stride)
	}
	fmt.Fprintln(bw, title)
	fmt.Fprintln(bw, strings.TrimRight(margin+string(labels), " "))
	row := func(name string, count func(Bin) int) {
		cells := make([]rune, len(bins))
		for i, b := range bins {
			n := count(b)
			cells[i] = levels[0]
			if n > 0 {
				cells[i] = levels[max(1, (n*8+most-1)/most)]
			}
		}
		fmt.Fprintln(bw, strings.TrimRight(fmt.Sprintf("%-10s%s", name, string(cells)), " "))
	}
	row("admitted", func(b Bin) int { return b.Admitted })
	row("denied", func(b Bin) int { return b.Denied })
	fmt.Fprintln(bw, margin+string(ruler))
	busiest, at := r.Busiest()
	fmt.Fprintf(bw, "%d requests: %d admitted, %d denied. Most admitted in one %s: %d (%s), at %s.\n",
		len(r.Requests), r.Admitted, r.Denied, ShortDuration(period), busiest, limitNote(r.Limit), ShortDuration(at))
	fmt.Fprintf(bw, "A column is %s; %c is %d requests.\n", ShortDuration(width), levels[len(levels)-1], most)
	if w := r.LongestWait(); w > 0 {
		fmt.Fprintf(bw, "Admitted requests are drawn when they start: they waited in the queue up to %s.\n", ShortDuration(w))
	}
	return bw.Flush()
}

// edgeLabels writes the times of the window edges k·stride·period on a
// line of n columns (one column a width), or returns nil if two would
// touch. The edge at 0 always fits.
func edgeLabels(n int, period, width, span, stride time.Duration) []rune {
	line := []rune(strings.Repeat(" ", n))
	free := 0 // the first column a label may start at
	for k := time.Duration(0); k*period <= span; k += stride {
		c, label := int(k*period/width), []rune(ShortDuration(k*period))
		if c < free {
			return nil
		}
		if c+len(label) > n {
			break
		}
		copy(line[c:], label)
		free = c + len(label) + 1
	}
	return line
}
