package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// halfSent opens n connections to addr from the loopback address local
// and sends half a request on each (headers never end). It returns them
// open; the test's cleanup closes them.
func halfSent(t *testing.T, addr, local string, n int) []net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range n {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d from %s: %v", i, local, err)
		}
		conns = append(conns, c)
		// A write to a connection the server already closed may fail; that
		// connection then counts as refused below.
		_, _ = c.Write([]byte("POST /v1/check HTTP/1.1\r\nHost: floodgate\r\nContent-Type: application/json\r\n"))
	}
	return conns
}

// held counts the connections the server keeps open: a read that waits
// until the deadline (the server holds the half-sent request) rather than
// ending at once (the server closed the connection on accept). The reads
// run at once, each started before the deadline (a read begun after it
// would time out whatever the connection's state).
func held(conns []net.Conn, deadline time.Time) int {
	var n atomic.Int64
	var wg sync.WaitGroup
	for _, c := range conns {
		_ = c.SetReadDeadline(deadline)
	}
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(n.Load())
}

// peakRSS is the process' peak resident memory in kB (VmHWM).
func peakRSS(t *testing.T, pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

// TestHTTPConnectionCaps: the HTTP port caps connections like the gRPC
// port: 3,000 half-sent requests from one address hold 64 connections
// (--max-connections-per-client), the rest are closed on accept, and other
// clients are still served; all clients together hold at most
// --max-connections. The port used to hold every one (+73 MB resident for
// 3,000, each up to 5s).
func TestHTTPConnectionCaps(t *testing.T) {
	p := startServe(t, "--max-connections", "100")
	before := peakRSS(t, p.cmd.Process.Pid)
	attack := halfSent(t, p.HTTPAddr, "127.0.0.1", 3000)
	if n := held(attack, time.Now().Add(2*time.Second)); n != 64 {
		t.Errorf("3,000 half-sent requests from one address: %d held, want 64", n)
	}
	after := peakRSS(t, p.cmd.Process.Pid)
	t.Logf("peak RSS %d kB before, %d kB after 3,000 half-sent requests (+%d kB)", before, after, after-before)

	// Another client is served meanwhile.
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}, Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + p.HTTPAddr + "/healthz")
	if err != nil {
		t.Fatalf("another client during the attack: %v", err)
	}
	resp.Body.Close()
	client.CloseIdleConnections()

	// The total: 64 more from each of two addresses hold 100 in all with
	// the first address' 64 (the first 36 of the others' fit).
	more := append(halfSent(t, p.HTTPAddr, "127.0.0.3", 64), halfSent(t, p.HTTPAddr, "127.0.0.4", 64)...)
	if n := held(more, time.Now().Add(2*time.Second)); n != 36 {
		t.Errorf("128 more from two addresses: %d held, want 36 (100 in all)", n)
	}

	// Closed, the connections' places are free again.
	for _, c := range append(attack, more...) {
		c.Close()
	}
	waitFor(t, 10*time.Second, "a connection after the attack", func() bool {
		resp, err := http.Get("http://" + p.HTTPAddr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}
