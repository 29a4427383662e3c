package simulate

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// The chart's geometry, in SVG user units (pixels).
const (
	svgWidth    = 760
	svgHeight   = 430
	plotLeft    = 56.0
	plotRight   = 744.0
	barsTop     = 78.0
	barsBottom  = 218.0
	trailTop    = 258.0
	trailBottom = 378.0
	chartBins   = 120 // at most this many bars
)

// Colours of the chart: Paul Tol's "bright" scheme, which stays distinct
// for colour-blind readers.
const (
	colorAdmitted = "#4477aa"
	colorDenied   = "#ee6677"
	colorTrailing = "#aa3377"
	colorLimit    = "#222222"
	colorGrid     = "#dddddd"
)

// WriteSVG draws r as a standalone SVG chart: on top, the arrivals per
// slice of time, admitted and denied stacked; below, Trailing against a
// dashed line at the limit; grey lines at the window edges.
func WriteSVG(w io.Writer, r Result, title string) error {
	bw := bufio.NewWriter(w)
	c := chart{w: bw, span: r.Span}
	width, bins := r.Bins(chartBins)
	busiest, _ := r.Busiest()
	period := ShortDuration(r.Limit.Period)
	summary := fmt.Sprintf("%d requests: %d admitted, %d denied. Most admitted in one %s: %d (%s).",
		len(r.Requests), r.Admitted, r.Denied, period, busiest, limitNote(r.Limit))

	c.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, svgHeight, svgWidth, svgHeight)
	c.printf("<title>%s</title>\n<desc>%s</desc>\n", escape(title), escape(summary))
	c.printf(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	c.printf(`<text x="16" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", escape(title))
	c.printf(`<text x="16" y="44">%s</text>`+"\n", escape(summary))

	// Window edges across both panels, thinned out when they would crowd.
	every := time.Duration(1)
	for c.x(every*r.Limit.Period)-plotLeft < 4 {
		every *= 2
	}
	for k := time.Duration(1); k*r.Limit.Period < r.Span; k += every {
		x := num(c.x(k * r.Limit.Period))
		c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`+"\n", x, num(barsTop), x, num(trailBottom), colorGrid)
	}

	// Top panel: arrivals per bin.
	most := 0
	for _, b := range bins {
		most = max(most, b.Admitted+b.Denied)
	}
	barsMax := axisMax(most)
	c.printf(`<text x="%s" y="%s">requests per %s</text>`+"\n", num(plotLeft), num(barsTop-8), ShortDuration(width))
	c.yAxis(barsTop, barsBottom, barsMax, 0, barsMax/2, barsMax)
	yBar := func(n int) float64 { return barsBottom - float64(n)/float64(barsMax)*(barsBottom-barsTop) }
	for i, b := range bins {
		x0, x1 := c.x(time.Duration(i)*width), c.x(min(time.Duration(i+1)*width, r.Span))
		if x1-x0 >= 3 {
			x0, x1 = x0+0.5, x1-0.5
		}
		if b.Admitted > 0 {
			c.rect(x0, yBar(b.Admitted), x1, barsBottom, colorAdmitted)
		}
		if b.Denied > 0 {
			c.rect(x0, yBar(b.Admitted+b.Denied), x1, yBar(b.Admitted), colorDenied)
		}
	}

	// Bottom panel: admitted in the trailing period, against the limit.
	// Its scale reaches at least twice the limit, so that charts of one
	// limit share it unless some algorithm goes further.
	limit := int(r.Limit.Requests)
	trailMax := axisMax(max(busiest, 2*limit))
	c.printf(`<text x="%s" y="%s">admitted in the last %s</text>`+"\n", num(plotLeft), num(trailTop-8), period)
	c.yAxis(trailTop, trailBottom, trailMax, 0, limit, 2*limit, trailMax)
	yTrail := func(n int) float64 { return trailBottom - float64(n)/float64(trailMax)*(trailBottom-trailTop) }
	path := stepPath(r.Trailing(), c.x, yTrail)
	c.printf(`<path d="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", path, colorTrailing)
	yLimit := num(yTrail(limit))
	c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-dasharray="6 4"/>`+"\n", num(plotLeft), yLimit, num(plotRight), yLimit, colorLimit)

	// Time axis.
	step := tickStep(r.Span, plotRight-plotLeft)
	for t := time.Duration(0); t <= r.Span; t += step {
		x := num(c.x(t))
		c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`+"\n", x, num(trailBottom), x, num(trailBottom+4), colorLimit)
		c.printf(`<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", x, num(trailBottom+17), ShortDuration(t))
	}

	// Legend.
	y := num(svgHeight - 14)
	c.printf(`<rect x="56" y="%s" width="12" height="12" fill="%s"/><text x="74" y="%s">admitted</text>`+"\n", num(svgHeight-24), colorAdmitted, y)
	c.printf(`<rect x="146" y="%s" width="12" height="12" fill="%s"/><text x="164" y="%s">denied</text>`+"\n", num(svgHeight-24), colorDenied, y)
	c.printf(`<line x1="226" y1="%s" x2="250" y2="%s" stroke="%s" stroke-width="2"/><text x="256" y="%s">admitted in the last %s</text>`+"\n",
		num(svgHeight-18), num(svgHeight-18), colorTrailing, y, period)
	c.printf(`<line x1="420" y1="%s" x2="444" y2="%s" stroke="%s" stroke-dasharray="6 4"/><text x="450" y="%s">%s per %s</text>`+"\n",
		num(svgHeight-18), num(svgHeight-18), colorLimit, y, escape(limitNote(r.Limit)), period)
	c.printf(`<line x1="600" y1="%s" x2="624" y2="%s" stroke="%s" stroke-width="3"/><text x="630" y="%s">window edge</text>`+"\n",
		num(svgHeight-18), num(svgHeight-18), colorGrid, y)
	c.printf("</svg>\n")
	if c.err != nil {
		return c.err
	}
	return bw.Flush()
}

// chart writes SVG elements, keeping the first write error.
type chart struct {
	w    io.Writer
	span time.Duration
	err  error
}

func (c *chart) printf(format string, args ...any) {
	if c.err == nil {
		_, c.err = fmt.Fprintf(c.w, format, args...)
	}
}

// x maps a time onto the plot's width.
func (c *chart) x(t time.Duration) float64 {
	return plotLeft + float64(t)/float64(c.span)*(plotRight-plotLeft)
}

func (c *chart) rect(x0, y0, x1, y1 float64, fill string) {
	c.printf(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>`+"\n", num(x0), num(y0), num(x1-x0), num(y1-y0), fill)
}

// yAxis draws a panel's frame, whose top stands for most, and labels the
// counts ticks with grid lines, leaving out a tick that would crowd the
// one before.
func (c *chart) yAxis(top, bottom float64, most int, ticks ...int) {
	c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`+"\n", num(plotLeft), num(bottom), num(plotRight), num(bottom), colorLimit)
	c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`+"\n", num(plotLeft), num(top), num(plotLeft), num(bottom), colorLimit)
	last := bottom + 100.0
	for _, n := range ticks {
		y := bottom - float64(n)/float64(most)*(bottom-top)
		if n < 0 || n > most || last-y < 14 {
			continue
		}
		last = y
		c.printf(`<text x="%s" y="%s" text-anchor="end">%d</text>`+"\n", num(plotLeft-6), num(y+4), n)
		if n > 0 {
			c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="0.5"/>`+"\n", num(plotLeft), num(y), num(plotRight), num(y), colorGrid)
		}
	}
}

// stepPath draws a step function as SVG path data, to the plot's right
// edge; steps on one x (as formatted) are drawn as one vertical stroke.
func stepPath(steps []Step, x func(time.Duration) float64, y func(int) float64) string {
	var b strings.Builder
	lastX, lastY := "", ""
	vertical := func(v string) {
		if v != lastY {
			b.WriteString("V" + v + " ")
			lastY = v
		}
	}
	for i := 0; i < len(steps); {
		xs := num(x(steps[i].At))
		lo, hi := steps[i].Count, steps[i].Count
		j := i
		for ; j < len(steps) && num(x(steps[j].At)) == xs; j++ {
			lo, hi = min(lo, steps[j].Count), max(hi, steps[j].Count)
		}
		end := steps[j-1].Count
		if i == 0 {
			fmt.Fprintf(&b, "M%s %s ", xs, num(y(steps[0].Count)))
			lastY = num(y(steps[0].Count))
		} else if xs != lastX {
			b.WriteString("H" + xs + " ")
		}
		lastX = xs
		for _, n := range []int{lo, hi, end} {
			vertical(num(y(n)))
		}
		i = j
	}
	b.WriteString("H" + num(plotRight))
	return b.String()
}

// axisMax is the top of a count axis showing n with some headroom (a
// tenth, at least one): the least round number above, 1, 1.2, 1.5, 2,
// 2.5, 3, 4, 5, 6 or 8 × 10^k, at least 1.
func axisMax(n int) int {
	want := n + max(1, (n+9)/10)
	for scale := 1; ; scale *= 10 {
		for _, m := range []int{10, 12, 15, 20, 25, 30, 40, 50, 60, 80} {
			if v := m * scale; v%10 == 0 && v/10 >= want {
				return v / 10
			}
		}
	}
}

// tickStep is the round time step that puts time labels at least 70
// units apart on a plot width units wide.
func tickStep(span time.Duration, width float64) time.Duration {
	for _, w := range niceWidths {
		if float64(w)/float64(span)*width >= 70 {
			return w
		}
	}
	return span
}

// num formats a coordinate with one decimal, the same way every time.
func num(v float64) string {
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// escape makes s safe as SVG text.
func escape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
