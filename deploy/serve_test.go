package deploy_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// server is a running floodgate serve.
type server struct {
	cmd      *exec.Cmd
	httpAddr string
	loaded   map[string]any // the "config loaded" log record
	logs     chan map[string]any
	exited   chan struct{} // closed when the process has exited
	err      error         // its exit status, once exited is closed
	stopped  bool          // stop has seen it exit
}

// startServe runs floodgate serve with args and env (JSON logs; listen
// addresses replaced by free loopback ports; FLOODGATE_REDIS_URL dropped,
// for the embedded store) until it logs "serving".
func startServe(t *testing.T, args []string, env map[string]string) *server {
	t.Helper()
	cmd := exec.Command(floodgateBinary(t), append([]string{"serve"}, args...)...)
	cmd.Env = []string{"HOME=" + t.TempDir()}
	for k, v := range env {
		switch k {
		case "FLOODGATE_GRPC_ADDR", "FLOODGATE_HTTP_ADDR", "FLOODGATE_REDIS_URL", "FLOODGATE_LOG_FORMAT":
			continue
		}
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "FLOODGATE_GRPC_ADDR=127.0.0.1:0", "FLOODGATE_HTTP_ADDR=127.0.0.1:0", "FLOODGATE_LOG_FORMAT=json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, logs: make(chan map[string]any, 64), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var rec map[string]any
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				rec = map[string]any{"msg": "(not JSON) " + sc.Text()}
			}
			s.logs <- rec
		}
		close(s.logs)
		s.err = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		if !s.stopped {
			_ = cmd.Process.Kill()
			for range s.logs {
			}
			<-s.exited
		}
	})
	// Bounded so that a server that never comes up fails the test rather
	// than hanging it; not a speed assertion.
	deadline := time.After(30 * time.Second)
	for {
		select {
		case rec, ok := <-s.logs:
			if !ok {
				<-s.exited
				t.Fatalf("floodgate serve exited before serving: %v", s.err)
			}
			switch rec["msg"] {
			case "config loaded":
				s.loaded = rec
			case "serving":
				addr, _ := rec["http"].(string)
				if addr == "" {
					t.Fatalf("serving without an HTTP admin address: %v", rec)
				}
				s.httpAddr = addr
				return s
			}
			if lvl, _ := rec["level"].(string); lvl == "ERROR" {
				t.Errorf("floodgate serve logged an error: %v", rec)
			}
		case <-deadline:
			t.Fatal("floodgate serve did not log serving within 30s")
		}
	}
}

// get asks the admin server for path and wants 200.
func (s *server) get(t *testing.T, path string) {
	t.Helper()
	resp, err := http.Get("http://" + s.httpAddr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
}

// stop sends SIGTERM, as the kubelet and docker do, and wants a clean exit
// that logs "stopped".
func (s *server) stop(t *testing.T, h help, cfg settings) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := false
	for rec := range s.logs {
		if rec["msg"] == "stopped" {
			stopped = true
		}
	}
	<-s.exited
	s.stopped = true
	if s.err != nil {
		t.Errorf("floodgate serve after SIGTERM: %v", s.err)
	}
	if !stopped {
		t.Errorf("floodgate serve exited without logging stopped (drain timeout %s)", cfg.value(h, "drain-timeout"))
	}
}
