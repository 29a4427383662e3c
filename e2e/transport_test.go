package e2e

import (
	"bufio"
	"bytes"
	"context"
	encbin "encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// plainBinary builds floodgate without the race detector, once: memory
// figures must come from the binary as shipped (the race detector
// multiplies every goroutine's and allocation's cost).
// It lives beside the race build, in the folder TestMain removes.
var plainBinary = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(filepath.Dir(binary), "floodgate-norace")
	out, err := exec.Command("go", "build", "-trimpath", "-o", bin, "../cmd/floodgate").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// procStatusKB reads a /proc/PID/status field in kB (VmRSS, VmHWM).
func procStatusKB(t *testing.T, pid int, field string) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatalf("%s: %q: %v", field, line, err)
			}
			return kb
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

// h2conn is a raw HTTP/2 client connection: it sends what a grpc-go
// client would not (calls without their message, ignoring the server's
// limits) and records how the server ends each stream.
type h2conn struct {
	t      *testing.T
	conn   net.Conn
	mu     sync.Mutex // guards fr's writes, enc, hbuf and nextID
	fr     *http2.Framer
	enc    *hpack.Encoder
	hbuf   bytes.Buffer
	nextID uint32

	ended   atomic.Int64 // streams the server ended (trailers or RST_STREAM)
	smu     sync.Mutex
	status  map[uint32]string // stream -> "grpc-status N" of its trailers, or "RST_STREAM CODE"
	goaway  atomic.Bool
	readErr chan error // the reader's end (EOF when the server closed)
}

// dialH2 opens a raw HTTP/2 connection to addr from the loopback address
// local.
func dialH2(t *testing.T, addr, local string) *h2conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", local, err)
	}
	t.Cleanup(func() { c.Close() })
	h := &h2conn{t: t, conn: c, nextID: 1, status: map[uint32]string{}, readErr: make(chan error, 1)}
	h.enc = hpack.NewEncoder(&h.hbuf)
	bw := bufio.NewWriterSize(c, 64<<10)
	h.fr = http2.NewFramer(flushWriter{bw}, c)
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	h.fr.MaxHeaderListSize = 1 << 20
	if _, err := bw.WriteString(http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := h.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	go h.read()
	return h
}

// flushWriter flushes after every frame, so frames leave at once.
type flushWriter struct{ w *bufio.Writer }

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		err = f.w.Flush()
	}
	return n, err
}

// read records how streams end and answers SETTINGS and PING.
func (h *h2conn) read() {
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			h.readErr <- err
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				h.mu.Lock()
				_ = h.fr.WriteSettingsAck()
				h.mu.Unlock()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				h.mu.Lock()
				_ = h.fr.WritePing(true, f.Data)
				h.mu.Unlock()
			}
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				h.end(f.StreamID, "grpc-status "+headerValue(f, "grpc-status"))
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				h.end(f.StreamID, "data")
			}
		case *http2.RSTStreamFrame:
			h.end(f.StreamID, "RST_STREAM "+f.ErrCode.String())
		case *http2.GoAwayFrame:
			h.goaway.Store(true)
		}
	}
}

func headerValue(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.Fields {
		if hf.Name == name {
			return hf.Value
		}
	}
	return ""
}

func (h *h2conn) end(id uint32, how string) {
	h.smu.Lock()
	defer h.smu.Unlock()
	if _, ok := h.status[id]; !ok {
		h.status[id] = how
		h.ended.Add(1)
	}
}

// statusOf is how the server ended stream id ("" while it is open).
func (h *h2conn) statusOf(id uint32) string {
	h.smu.Lock()
	defer h.smu.Unlock()
	return h.status[id]
}

// open starts a call to Check with extra metadata; with msg it also sends
// the message and half-closes, else it sends the headers alone (a silent
// call). It returns the stream ID, or an error when the write failed.
func (h *h2conn) open(extra [][2]string, msg []byte) (uint32, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := h.nextID
	h.nextID += 2
	h.hbuf.Reset()
	for _, hf := range append([][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", floodgatev1.RateLimiter_Check_FullMethodName},
		{":authority", "floodgate"}, {"content-type", "application/grpc"}, {"te", "trailers"},
	}, extra...) {
		if err := h.enc.WriteField(hpack.HeaderField{Name: hf[0], Value: hf[1]}); err != nil {
			return 0, err
		}
	}
	block := h.hbuf.Bytes()
	const chunk = 16 << 10 // the default SETTINGS_MAX_FRAME_SIZE
	first := block[:min(len(block), chunk)]
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndHeaders: len(block) <= chunk}); err != nil {
		return id, err
	}
	for rest := block[len(first):]; len(rest) > 0; {
		n := min(len(rest), chunk)
		if err := h.fr.WriteContinuation(id, n == len(rest), rest[:n]); err != nil {
			return id, err
		}
		rest = rest[n:]
	}
	if msg == nil {
		return id, nil
	}
	frame := make([]byte, 5+len(msg))
	encbin.BigEndian.PutUint32(frame[1:5], uint32(len(msg)))
	copy(frame[5:], msg)
	return id, h.fr.WriteData(id, true, frame)
}

// pollUntil polls cond every 50ms until it holds or d passes.
func pollUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// dialFrom is a gRPC client of addr whose connections come from the
// loopback address local.
func dialFrom(t *testing.T, addr, local string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
			return d.DialContext(ctx, "tcp", a)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// legitCalls makes Check calls on conn until stop is closed and reports
// how many it made and the first failure.
func legitCalls(conn *grpc.ClientConn, stop <-chan struct{}) (calls int, firstErr error) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return calls, firstErr
		default:
		}
		if code := callCode(context.Background(), conn); code != codes.OK && firstErr == nil {
			firstErr = fmt.Errorf("call %d: %v", i, code)
		}
		calls++
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTransportSilentStreams: with the default limits,
// 10,000 calls from one client address that send their headers and never
// their message add at most 40 MB to the server's resident memory (peak);
// the calls past the per-client limit are refused at once
// (ResourceExhausted), the others end with the unary deadline
// (DeadlineExceeded); a client on another address is served throughout,
// and the flooding address is served again once its calls ended.
func TestTransportSilentStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 10,000 streams")
	}
	bin, err := plainBinary()
	if err != nil {
		t.Fatal(err)
	}
	p := startBinary(t, bin)
	pid := p.cmd.Process.Pid
	legit := dialFrom(t, p.GRPCAddr, "127.0.0.2")
	for range 20 { // warm up: the first calls allocate pools and caches
		if code := callCode(context.Background(), legit); code != codes.OK {
			t.Fatalf("warm-up Check: %v", code)
		}
	}
	before := procStatusKB(t, pid, "VmRSS")

	stop := make(chan struct{})
	type result struct {
		calls int
		err   error
	}
	legitDone := make(chan result, 1)
	go func() {
		n, err := legitCalls(legit, stop)
		legitDone <- result{n, err}
	}()

	const conns, perConn = 20, 500
	var flood []*h2conn
	for range conns {
		h := dialH2(t, p.GRPCAddr, "127.0.0.1")
		flood = append(flood, h)
		for range perConn {
			if _, err := h.open(nil, nil); err != nil {
				t.Fatalf("opening a silent stream: %v", err)
			}
		}
	}
	ended := func() int {
		n := 0
		for _, h := range flood {
			n += int(h.ended.Load())
		}
		return n
	}
	// The refusals come at once; give them a moment to arrive, then read
	// the peak while the admitted calls are still held.
	pollUntil(3*time.Second, func() bool { return ended() >= conns*perConn-512 })
	time.Sleep(500 * time.Millisecond)
	peak := procStatusKB(t, pid, "VmHWM")
	held := conns*perConn - ended()
	t.Logf("RSS before %d kB, peak with the silent streams %d kB (+%.1f MB); %d of %d streams held", before, peak, float64(peak-before)/1024, held, conns*perConn)
	if growth := peak - before; growth > 40<<10 {
		t.Errorf("10,000 silent streams took resident memory from %d kB to %d kB (+%d kB); want at most +40 MB", before, peak, growth)
	}

	// Every silent call ends: refused, or at the unary deadline.
	if !pollUntil(15*time.Second, func() bool { return ended() == conns*perConn }) {
		t.Errorf("%d of %d silent streams still open 15s later: no deadline for a call's message", conns*perConn-ended(), conns*perConn)
	}
	codesSeen := map[string]int{}
	for _, h := range flood {
		h.smu.Lock()
		for _, s := range h.status {
			codesSeen[s]++
		}
		h.smu.Unlock()
	}
	t.Logf("how the silent streams ended: %v", codesSeen)
	if codesSeen["grpc-status "+strconv.Itoa(int(codes.ResourceExhausted))] == 0 {
		t.Errorf("no silent stream was refused with ResourceExhausted: %v", codesSeen)
	}

	close(stop)
	if r := <-legitDone; r.err != nil || r.calls < 10 {
		t.Errorf("the client on another address during the flood: %d calls, first failure %v; want every call served", r.calls, r.err)
	}
	for _, h := range flood {
		h.conn.Close()
	}
	// The flooding address's places were released.
	again := dialFrom(t, p.GRPCAddr, "127.0.0.1")
	if !pollUntil(5*time.Second, func() bool { return callCode(context.Background(), again) == codes.OK }) {
		t.Errorf("127.0.0.1 is not served after its silent streams ended")
	}
}

// TestTransportHugeMetadata: a call with 4 MB of
// metadata is refused (RST_STREAM, GOAWAY or the connection closed), and
// the server keeps serving.
func TestTransportHugeMetadata(t *testing.T) {
	p := startServe(t)
	msg, err := proto.Marshal(inlineCheck("huge"))
	if err != nil {
		t.Fatal(err)
	}
	h := dialH2(t, p.GRPCAddr, "127.0.0.3")
	// A control call on the same kind of connection is served, so a
	// refusal below is the metadata's doing.
	small := dialH2(t, p.GRPCAddr, "127.0.0.3")
	id, err := small.open([][2]string{{"x-small", "ok"}}, msg)
	if err != nil {
		t.Fatal(err)
	}
	if !pollUntil(10*time.Second, func() bool { return small.statusOf(id) != "" }) || small.statusOf(id) != "grpc-status 0" {
		t.Fatalf("a call with small metadata ended with %q; want grpc-status 0", small.statusOf(id))
	}

	big := strings.Repeat("x", 4<<20)
	id, werr := h.open([][2]string{{"x-big", big}}, msg)
	var how string
	pollUntil(10*time.Second, func() bool {
		if how = h.statusOf(id); how != "" {
			return true
		}
		if h.goaway.Load() {
			how = "GOAWAY"
			return true
		}
		select {
		case err := <-h.readErr:
			how = "connection closed: " + err.Error()
			return true
		default:
			return false
		}
	})
	t.Logf("4 MB of metadata: write error %v, the server answered %q", werr, how)
	if how == "" && werr == nil {
		t.Fatal("4 MB of metadata: no answer in 10s")
	}
	if strings.Contains(how, "grpc-status 0") || strings.HasPrefix(how, "data") {
		t.Errorf("a call with 4 MB of metadata was served (%s); want it refused", how)
	}
	if code := callCode(context.Background(), p.Conn(t)); code != codes.OK {
		t.Errorf("a Check after the refused call: %v, want OK", code)
	}
}

// TestTransportAuthBeforeMessage: with
// --auth-token-file, a call without a token is refused when its headers
// arrive: the client learns Unauthenticated without sending its message,
// so unauthenticated callers hold nothing while they stay silent.
func TestTransportAuthBeforeMessage(t *testing.T) {
	tokens := writeFile(t, t.TempDir(), "tokens", []byte("svc-token-0123456789\n"))
	p := startServe(t, "--auth-token-file", tokens)
	h := dialH2(t, p.GRPCAddr, "127.0.0.1")
	id, err := h.open(nil, nil) // headers only, no token
	if err != nil {
		t.Fatal(err)
	}
	want := "grpc-status " + strconv.Itoa(int(codes.Unauthenticated))
	pollUntil(3*time.Second, func() bool { return h.statusOf(id) != "" })
	if got := h.statusOf(id); got != want {
		t.Errorf("a silent call without a token, 3s on: ended with %q; want %q at once", got, want)
	}
}

// TestAdminPprofOff: /debug/pprof/ is not served unless
// --pprof is given.
func TestAdminPprofOff(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, http.StatusNotFound},
		{[]string{"--pprof"}, http.StatusOK},
	} {
		p := startServe(t, tc.args...)
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=2", "/debug/pprof/cmdline"} {
			resp, err := http.Get("http://" + p.HTTPAddr + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("serve %v: GET %s: %d, want %d", tc.args, path, resp.StatusCode, tc.want)
			}
		}
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAdminTimeouts: the admin server closes an idle
// keep-alive connection, and one whose request body stops half-way, within
// its timeouts (10s; the test allows 20s).
func TestAdminTimeouts(t *testing.T) {
	t.Parallel() // it waits for the server's timeouts; other tests run meanwhile
	p := startServe(t)
	idle, err := net.Dial("tcp", p.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	partial, err := net.Dial("tcp", p.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer partial.Close()

	if _, err := io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: floodgate\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, err := io.WriteString(partial, "POST /healthz HTTP/1.1\r\nHost: floodgate\r\nContent-Length: 1000\r\n\r\nhalf a bo"); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	for name, c := range map[string]net.Conn{"an idle keep-alive connection": idle, "a request whose body stops": partial} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			_ = c.SetReadDeadline(start.Add(20 * time.Second))
			_, err := io.Copy(io.Discard, c) // until the server closes it
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Errorf("%s is still open after 20s", name)
				return
			}
			t.Logf("%s closed by the server after %v", name, time.Since(start).Round(100*time.Millisecond))
		}()
	}
	wg.Wait()
}
