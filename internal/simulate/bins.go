package simulate

import (
	"fmt"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// Bin counts the decisions in one slice of time.
type Bin struct {
	Admitted, Denied int
}

// niceWidths are the bin widths a chart may use, so that its columns and
// labels fall on round times.
var niceWidths = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 2 * 24 * time.Hour, 7 * 24 * time.Hour,
}

// binWidth is the smallest round width that cuts span into at most most
// bins.
func binWidth(span time.Duration, most int) time.Duration {
	for _, w := range niceWidths {
		if (span+w-1)/w <= time.Duration(most) {
			return w
		}
	}
	return (span + time.Duration(most) - 1) / time.Duration(most)
}

// Bins cuts the result's span into at most most bins of a round width and
// counts the decisions in each: bin i holds the admitted requests that
// started, and the denied ones that arrived, in [i·width, (i+1)·width).
func (r Result) Bins(most int) (width time.Duration, bins []Bin) {
	width = binWidth(r.Span, most)
	bins = make([]Bin, max(1, (r.Span+width-1)/width))
	for _, q := range r.Requests {
		if q.Allowed {
			bins[min(int(q.Start()/width), len(bins)-1)].Admitted++
		} else {
			bins[min(int(q.At/width), len(bins)-1)].Denied++
		}
	}
	return width, bins
}

// limitNote names the bound of a limit for a reader: "limit 10", or
// "limit 10, burst 30" for a bucket whose burst differs ("queue 30" for
// one that waits).
func limitNote(l algorithms.Limit) string {
	if c := l.Capacity(); c != l.Requests && l.Algorithm.Facts().Waits {
		return fmt.Sprintf("limit %d, queue %d", l.Requests, c)
	} else if c != l.Requests {
		return fmt.Sprintf("limit %d, burst %d", l.Requests, c)
	}
	return fmt.Sprintf("limit %d", l.Requests)
}
