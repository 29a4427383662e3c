package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMakeRunCtrlC: Ctrl-C in a terminal interrupts the whole foreground
// process group, make included. floodgate drains and exits 0 (its last
// line is "stopped", and make reports no error of its recipe); make itself
// dies of the SIGINT, exit status 130 in a shell, as the README says.
func TestMakeRunCtrlC(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("make is not installed, and CI=true runs every test")
		}
		t.Skip("make is not installed")
	}
	cmd := exec.Command("make", "--no-print-directory", "-o", "build", "run", "BIN="+binary,
		"ARGS=--grpc-addr 127.0.0.1:0 --http-addr 127.0.0.1:0")
	cmd.Dir = ".."
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a terminal's foreground group
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "msg=serving") {
		if time.Now().After(deadline) {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Fatalf("make run did not serve within 30s:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("make run after Ctrl-C: %v, want it killed by SIGINT:\n%s", err, out.String())
	}
	ws, _ := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Errorf("make run after Ctrl-C: %v, want it killed by SIGINT (130 in a shell)", err)
	}
	log := out.String()
	if !strings.Contains(log, "msg=stopped") || strings.Contains(log, "Error") {
		t.Errorf("floodgate did not stop cleanly:\n%s", log)
	}
}

// lockedBuffer is a bytes.Buffer that make's output and the test share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
