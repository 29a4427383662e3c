package xdsrules

import (
	"errors"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/rules"
)

func parsed(t *testing.T, name, domain string, n int) *rules.Set {
	t.Helper()
	c, err := rules.Parse(name, []byte("domain: "+domain+"\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: "+strings.Repeat("1", n)+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// limitOf is the requests_per_unit of k=v in domain under l's rules; 0
// when nothing matches.
func limitOf(l *Live, domain string) int64 {
	ls := l.Current().Match(domain, []rules.Entry{{Key: "k", Value: "v"}})
	if len(ls) != 1 {
		return 0
	}
	return ls[0].Rate.Requests
}

// TestLive: the files' and the xDS parts swap in together; a part
// that would define a domain twice is refused and the previous rules keep
// serving; a refused files' reload applies once xDS no longer clashes.
func TestLive(t *testing.T) {
	swaps := 0
	l := NewLive(func() { swaps++ })
	if l.Current() != nil {
		t.Fatal("rules before any part")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := l.SetFile(parsed(t, "/etc/floodgate/f.yaml", "f", 1))
	must(err)
	_, err = l.SetXDS([]*rules.Set{parsed(t, "xds:a", "a", 2)})
	must(err)
	if limitOf(l, "f") != 1 || limitOf(l, "a") != 11 || swaps != 2 {
		t.Fatalf("limits %d, %d after %d swaps; want 1, 11, 2", limitOf(l, "f"), limitOf(l, "a"), swaps)
	}

	// xDS defining the files' domain: refused, the previous rules stay.
	_, err = l.SetXDS([]*rules.Set{parsed(t, "xds:a", "a", 3), parsed(t, "xds:clash", "f", 4)})
	if err == nil || err.Error() != `xds:clash: duplicate domain "f": already defined by /etc/floodgate/f.yaml` {
		t.Errorf("xDS clash: err %v", err)
	}
	if limitOf(l, "f") != 1 || limitOf(l, "a") != 11 || swaps != 2 {
		t.Errorf("after the refused xDS part: limits %d, %d, %d swaps", limitOf(l, "f"), limitOf(l, "a"), swaps)
	}

	// A files' reload defining an xDS domain: refused, then applied once
	// the xDS part drops that domain.
	if _, err := l.SetFile(parsed(t, "f.yaml", "a", 5)); err == nil || !strings.Contains(err.Error(), `duplicate domain "a"`) {
		t.Errorf("files' clash: err %v", err)
	}
	if limitOf(l, "f") != 1 || limitOf(l, "a") != 11 {
		t.Errorf("after the refused reload: limits %d, %d", limitOf(l, "f"), limitOf(l, "a"))
	}
	retried, err := l.SetXDS([]*rules.Set{parsed(t, "xds:b", "b", 6)})
	must(err)
	if !retried || limitOf(l, "a") != 11111 || limitOf(l, "f") != 0 || limitOf(l, "b") != 111111 {
		t.Errorf("after xDS dropped a: retried %v, limits a %d, f %d, b %d", retried, limitOf(l, "a"), limitOf(l, "f"), limitOf(l, "b"))
	}
}

// TestLiveDomainMovesToXDS: a domain moving from the files to xDS
// (xDS adds it while a file still defines it, then the file drops it)
// applies once the file drops it, without the management server
// resending; a refusal tells the management server the resource and the
// domain, never a local path.
func TestLiveDomainMovesToXDS(t *testing.T) {
	l := NewLive(nil)
	if _, err := l.SetFile(parsed(t, "/etc/floodgate/rules/a.yaml", "a", 1)); err != nil {
		t.Fatal(err)
	}
	_, err := l.SetXDS([]*rules.Set{parsed(t, "xds:moved", "a", 2), parsed(t, "xds:b", "b", 3)})
	if err == nil {
		t.Fatal("xDS defining the files' domain: accepted")
	}
	r, ok := errors.AsType[*Refusal](err)
	if !ok {
		t.Fatalf("refusal %T %v, want a *Refusal", err, err)
	}
	if want := `xds:moved: domain "a" is defined by this server's local config files too`; r.Message != want {
		t.Errorf("NACK message %q, want %q", r.Message, want)
	}
	if !strings.Contains(err.Error(), "/etc/floodgate/rules/a.yaml") {
		t.Errorf("local error %q: want the file named in the log", err)
	}
	if limitOf(l, "a") != 1 || limitOf(l, "b") != 0 {
		t.Fatalf("after the refusal: limits a %d, b %d; want 1, 0", limitOf(l, "a"), limitOf(l, "b"))
	}
	// Another files' reload that still defines a: the xDS part stays out.
	retried, err := l.SetFile(parsed(t, "/etc/floodgate/rules/a.yaml", "a", 4))
	if err != nil || retried || limitOf(l, "a") != 1111 || limitOf(l, "b") != 0 {
		t.Fatalf("reload keeping a: retried %v, err %v, limits a %d, b %d", retried, err, limitOf(l, "a"), limitOf(l, "b"))
	}
	// The file drops a: the refused xDS response applies now.
	retried, err = l.SetFile(parsed(t, "/etc/floodgate/rules/a.yaml", "other", 5))
	if err != nil || !retried {
		t.Fatalf("file dropped a: retried %v, err %v; want the xDS part retried", retried, err)
	}
	if limitOf(l, "a") != 11 || limitOf(l, "b") != 111 || limitOf(l, "other") != 11111 {
		t.Errorf("after the retry: limits a %d, b %d, other %d; want 11, 111, 11111", limitOf(l, "a"), limitOf(l, "b"), limitOf(l, "other"))
	}
	// Applied once: the next files' reload retries nothing.
	if retried, err := l.SetFile(parsed(t, "/etc/floodgate/rules/a.yaml", "other", 5)); err != nil || retried {
		t.Errorf("reload after the retry: retried %v, err %v; want nothing retried", retried, err)
	}
	// A refused response replaced by an accepted one is not pending.
	if _, err := l.SetXDS([]*rules.Set{parsed(t, "xds:again", "other", 8)}); err == nil {
		t.Fatal("xDS defining the files' domain other: accepted")
	}
	if _, err := l.SetXDS([]*rules.Set{parsed(t, "xds:b", "b", 6)}); err != nil {
		t.Fatal(err)
	}
	if retried, _ := l.SetFile(parsed(t, "/etc/floodgate/rules/a.yaml", "zzz", 7)); retried || limitOf(l, "a") != 0 || limitOf(l, "b") != 111111 || limitOf(l, "other") != 0 {
		t.Errorf("stale pending part: retried %v, limits a %d, b %d, other %d", retried, limitOf(l, "a"), limitOf(l, "b"), limitOf(l, "other"))
	}
}
