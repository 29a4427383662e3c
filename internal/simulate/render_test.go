package simulate

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

func edgeResult(t *testing.T, a algorithms.Algorithm) Result {
	t.Helper()
	l := limitOf(a, 10, time.Minute)
	tr := mustJoin(t, time.Minute, func() (Segment, error) { return Edge(l, time.Minute) })
	r, err := Run(l, tr)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestWriteText(t *testing.T) {
	for _, tc := range []struct {
		a    algorithms.Algorithm
		want string
	}{{algorithms.FixedWindow, `fixed_window 10/1m, edge
          0s                            1m                            2m
admitted                               ██
denied
          |-----------------------------|-----------------------------|
20 requests: 20 admitted, 0 denied. Most admitted in one 1m: 20 (limit 10), at 1m.
A column is 2s; █ is 10 requests.
`}, {algorithms.SlidingWindow, `sliding_window 10/1m, edge
          0s                            1m                            2m
admitted                               █
denied                                  █
          |-----------------------------|-----------------------------|
20 requests: 10 admitted, 10 denied. Most admitted in one 1m: 10 (limit 10), at 59s.
A column is 2s; █ is 10 requests.
`}} {
		var b bytes.Buffer
		if err := WriteText(&b, edgeResult(t, tc.a), tc.a.String()+" 10/1m, edge"); err != nil {
			t.Fatal(err)
		}
		if got := b.String(); got != tc.want {
			t.Errorf("%v: got\n%s\nwant\n%s", tc.a, got, tc.want)
		}
	}
}

// TestWriteTextManyWindows: when window edges are closer than two columns,
// only some are marked, and labels never overlap.
func TestWriteTextManyWindows(t *testing.T) {
	l := limitOf(algorithms.SlidingWindowLog, 2, time.Second)
	tr := mustJoin(t, time.Second, func() (Segment, error) { return Steady(3, time.Second, 0, 5*time.Minute) })
	r, err := Run(l, tr)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteText(&b, r, "many"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if want := "          0s    30s   1m    1m30s 2m    2m30s 3m    3m30s 4m    4m30s 5m"; lines[1] != want {
		t.Errorf("labels: got %q, want %q", lines[1], want)
	}
	if got := strings.Count(lines[4], "|"); got != 31 {
		t.Errorf("ruler %q: %d edges marked, want 31 (every 10s over 5m)", lines[4], got)
	}
	if !strings.Contains(b.String(), "900 requests: 600 admitted, 300 denied. Most admitted in one 1s: 2 (limit 2)") {
		t.Errorf("summary: got\n%s", b.String())
	}
}

func TestWriteSVG(t *testing.T) {
	r := edgeResult(t, algorithms.FixedWindow)
	var a, b bytes.Buffer
	title := `fixed_window 10/1m, traffic "edge" <&>`
	if err := WriteSVG(&a, r, title); err != nil {
		t.Fatal(err)
	}
	if err := WriteSVG(&b, r, title); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two charts of the same result differ")
	}
	svg := a.String()

	// Well-formed XML, with the title escaped; count the elements.
	dec := xml.NewDecoder(strings.NewReader(svg))
	counts := map[string]int{}
	var titles []string
	inTitle := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, svg)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			counts[e.Name.Local]++
			inTitle = e.Name.Local == "title"
		case xml.CharData:
			if inTitle {
				titles = append(titles, string(e))
			}
		case xml.EndElement:
			inTitle = false
		}
	}
	if len(titles) != 1 || titles[0] != title {
		t.Errorf("title: got %q, want %q", titles, title)
	}
	// Two bars (the bursts at 59s and 1m0s, in bins of 1s), a background
	// and two legend swatches.
	if counts["rect"] != 5 {
		t.Errorf("got %d rects, want 5", counts["rect"])
	}
	for _, want := range []string{
		`fill="#4477aa"`,            // admitted bars
		`stroke-dasharray="6 4"`,    // the limit line
		`>limit 10 per 1m<`,         // its legend
		`>admitted in the last 1m<`, // the trailing count
		`>requests per 1s<`,         // the bars' unit
		`M56.0 378.0 H394.3 V330.0 H400.0 V282.0 H738.3 V330.0 H744.0`, // 0; 10 from 59s; 20 from 1m; 10 from 1m59s
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("chart lacks %q:\n%s", want, svg)
		}
	}
	if strings.Contains(svg, `fill="#ee6677" `) || strings.Count(svg, `#ee6677`) != 1 {
		t.Errorf("a fixed window denies none of the edge attack, but the chart draws denied bars:\n%s", svg)
	}
}

// TestStepPath: steps on one x become one vertical stroke over their
// range, ending at the last; steps elsewhere are drawn one by one.
func TestStepPath(t *testing.T) {
	var steps []Step
	for i := range 1000 { // 1000 steps within 1s: 0, 1, 2, 3, 0, 1, … 3, then 2
		steps = append(steps, Step{At: time.Duration(i) * time.Millisecond, Count: i % 4})
	}
	steps[999].Count = 2
	steps = append(steps, Step{At: time.Minute, Count: 7}, Step{At: 2 * time.Minute, Count: 0})
	x := func(t time.Duration) float64 { return plotLeft + float64(t/time.Second) } // one unit a second
	y := func(n int) float64 { return float64(100 - n) }
	want := "M56.0 100.0 V97.0 V98.0 H116.0 V93.0 H176.0 V100.0 H744.0"
	if got := stepPath(steps, x, y); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestAxisMax(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{0, 1}, {1, 2}, {3, 4}, {4, 5}, {9, 10}, {10, 12}, {20, 25}, {38, 50}, {100, 120}, {1000, 1200},
	} {
		if got := axisMax(tc.n); got != tc.want || got <= tc.n {
			t.Errorf("axisMax(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestBins(t *testing.T) {
	r := edgeResult(t, algorithms.SlidingWindow)
	width, bins := r.Bins(60)
	if width != 2*time.Second || len(bins) != 60 {
		t.Fatalf("got %d bins of %v, want 60 of 2s", len(bins), width)
	}
	if bins[29] != (Bin{Admitted: 10}) || bins[30] != (Bin{Denied: 10}) {
		t.Errorf("bins 29 and 30: got %+v, %+v; want 10 admitted, then 10 denied", bins[29], bins[30])
	}
	if got := binWidth(366*24*time.Hour, 10); got < 366*24*time.Hour/10 {
		t.Errorf("binWidth past the round widths: got %v, too narrow", got)
	}
}
