package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/pflag"

	"github.com/floodgate/floodgate/internal/limited"
)

const topSynopsis = `Shows who is being limited right now: the heaviest denied keys of each rule,
as GET /debug/limited on the admin (--http-addr) port answers. With several
--addr (one per replica: each tracks its own decisions), their answers are
merged: counts added, first and last seen widened. --watch redraws the table
in place every --interval until Ctrl-C.

  floodgate top
  floodgate top --addr 10.0.0.5:8080 --addr 10.0.0.6:8080 --rule per_ip --watch
  floodgate top --domain shop --by cost --window 15m --json

Counts over 1m and 15m decay (a key denied steadily N times a minute shows N
in the 1m column); "total" counts since the key was first seen. Exit status:
0 when every address answered; 1 when one did not (the others are shown); 2
on bad flags.`

// topFlags are the settings of `floodgate top`.
type topFlags struct {
	addrs    []string
	q        limited.Query
	token    string
	timeout  time.Duration
	watch    bool
	interval time.Duration
	json     bool
}

func (f *topFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.addrs, "addr", []string{"127.0.0.1:8080"}, "admin HTTP address of a replica (host:port, or an http:// or https:// URL); repeat for each replica to merge")
	fs.StringVar(&f.q.Rule, "rule", "", "only the rules of this name (an Envoy rule's name, a policy, or \"inline …\")")
	fs.StringVar(&f.q.Domain, "domain", "", "only the rules of this Envoy domain")
	fs.IntVar(&f.q.K, "k", limited.DefaultK, "keys per rule")
	fs.StringVar(&f.q.By, "by", "denied", "rank keys by denied requests (denied) or denied cost (cost)")
	fs.StringVar(&f.q.Window, "window", "1m", "rank over the last minute (1m) or 15 minutes (15m)")
	fs.StringVar(&f.token, "token", "", "admin token, when the server has --auth-token-file (sent as Authorization: Bearer)")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Second, "bound on each address's answer")
	fs.BoolVar(&f.watch, "watch", false, "redraw in place every --interval until interrupted")
	fs.DurationVar(&f.interval, "interval", 2*time.Second, "--watch: time between redraws")
	fs.BoolVar(&f.json, "json", false, "print the merged report as JSON (once)")
}

func runTop(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var f topFlags
	fs := newFlagSet("top [flags]", topSynopsis, stdout)
	f.register(fs)
	if err := parseCommand(fs, args, getenv, stderr); err != nil {
		return err
	}
	err := f.q.Validate()
	switch {
	case err != nil:
		err = errors.New("--" + err.Error())
	case len(f.addrs) == 0:
		err = errors.New("--addr: give at least one")
	case f.interval <= 0 || f.timeout <= 0:
		err = errors.New("--interval and --timeout must be positive")
	case f.watch && f.json:
		err = errors.New("--watch and --json do not go together")
	}
	if err != nil {
		return failed(stderr, "top", 2, err)
	}
	urls := make([]string, len(f.addrs))
	for i, a := range f.addrs {
		if urls[i], err = limitedURL(a, f.q); err != nil {
			return failed(stderr, "top", 2, err)
		}
	}
	client := &http.Client{Timeout: f.timeout}
	for {
		report, errs := fetchLimited(ctx, client, urls, f.token, f.q)
		switch {
		case f.json:
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(report); err != nil {
				return err
			}
		case f.watch:
			fmt.Fprint(stdout, "\x1b[H\x1b[2J") // home and clear: redraw in place
			writeTop(stdout, report, f.q, errs)
		default:
			writeTop(stdout, report, f.q, errs)
		}
		if !f.watch {
			if len(errs) > 0 {
				for _, e := range errs {
					fmt.Fprintf(stderr, "floodgate top: %v\n", e)
				}
				return exitCode(1)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(f.interval):
		}
	}
}

// limitedURL is /debug/limited at addr for q. Each replica is asked for
// every key it tracks (k=MaxKeys, cut to its own count), so that the merge
// sums a key wherever it ranks.
func limitedURL(addr string, q limited.Query) (string, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--addr %q: want host:port or an http(s):// URL", addr)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/debug/limited"
	v := url.Values{}
	for name, val := range map[string]string{"rule": q.Rule, "domain": q.Domain, "by": q.By, "window": q.Window} {
		if val != "" {
			v.Set(name, val)
		}
	}
	v.Set("k", strconv.Itoa(limited.MaxKeys))
	u.RawQuery = v.Encode()
	return u.String(), nil
}

// fetchLimited asks every url at once and merges the answers; errs says
// which did not answer, in the order of urls.
func fetchLimited(ctx context.Context, c *http.Client, urls []string, token string, q limited.Query) (limited.Report, []error) {
	answers, errs := make([]limited.Report, len(urls)), make([]error, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() { answers[i], errs[i] = getLimited(ctx, c, u, token) })
	}
	wg.Wait()
	var reports []limited.Report
	for i, err := range errs {
		if err == nil {
			reports = append(reports, answers[i])
		}
	}
	return limited.Merge(q, limited.MaxKeys, reports...), slices.DeleteFunc(errs, func(err error) bool { return err == nil })
}

func getLimited(ctx context.Context, c *http.Client, u, token string) (limited.Report, error) {
	var r limited.Report
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return r, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return r, fmt.Errorf("%s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("%s: %s: %s", u, resp.Status, terminalSafe(strings.TrimSpace(string(body))))
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("%s: %w", u, err)
	}
	return r, nil
}

// writeTop prints r as a table per rule.
func writeTop(w io.Writer, r limited.Report, q limited.Query, errs []error) {
	window := cmp.Or(q.Window, "1m")
	by := "denied requests"
	if q.By == "cost" {
		by = "denied cost"
	}
	fmt.Fprintf(w, "floodgate top: %d replica(s) at %s, keys by %s over %s", r.Replicas, r.Now.Format("15:04:05 UTC"), by, window)
	if r.Hashed {
		fmt.Fprint(w, " (keys hashed)")
	}
	fmt.Fprintln(w)
	for _, e := range errs {
		fmt.Fprintf(w, "! %s\n", terminalSafe(e.Error()))
	}
	if len(r.Rules) == 0 {
		fmt.Fprintln(w, "\nno rule has decided anything yet")
	}
	m1 := window != "15m"
	for _, rr := range r.Rules {
		name := rr.Rule
		if rr.Domain != "" {
			name = rr.Domain + " / " + rr.Rule
		}
		var denied10m int64
		for _, p := range rr.Series {
			denied10m += p.Denied
		}
		fmt.Fprintf(w, "\n%s  (%s, %s)  denied %d in 10m, %d of %d decisions in all\n", terminalSafe(name), rr.Kind, rr.Limit, denied10m, rr.Denied, rr.Decisions)
		if len(rr.Keys) == 0 {
			fmt.Fprintln(w, "  no key denied in the window")
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "  DENIED %s\tCOST %s\tTOTAL\tALLOWED %s\tLAST SEEN\t  KEY\n", window, window, window)
		for _, k := range rr.Keys {
			d, c, share := k.Denied.M15, k.DeniedCost.M15, k.AllowedShare.M15
			if m1 {
				d, c, share = k.Denied.M1, k.DeniedCost.M1, k.AllowedShare.M1
			}
			ago := r.Now.Sub(k.LastSeen).Round(time.Second)
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%.0f%%\t%s ago\t  %s\n", decimal(d), decimal(c), k.Denied.Total, share*100, ago, terminalSafe(k.Key))
		}
		_ = tw.Flush()
	}
}

func decimal(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

// terminalSafe replaces what a terminal would act on (escapes, control
// and format characters) with '?': the server escapes keys already, and
// an address answering something else must not drive the terminal.
func terminalSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == unicode.ReplacementChar {
			return '?'
		}
		return r
	}, s)
}
