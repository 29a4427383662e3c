package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate/floodgate/store/redisstore"
)

// syncBuffer is a bytes.Buffer safe for a logger and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// reloadFunc is a watcher whose Reload calls it.
type reloadFunc func() error

func (f reloadFunc) Reload() error { return f() }
func (reloadFunc) Close() error    { return nil }

// TestReloadOnHangup: each signal reloads every item, in order, and logs
// what reloaded and what failed (a failure does not stop the others);
// the loop ends with its context.
func TestReloadOnHangup(t *testing.T) {
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	var mu sync.Mutex
	var calls []string
	item := func(name string, err error) reloadable {
		return reloadable{name, reloadFunc(func() error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, name)
			return err
		})}
	}
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		reloadOnHangup(ctx, hup, []reloadable{item("rules", errors.New("bad line 3")), item("tls", nil), item("tokens", nil)}, log)
		close(done)
	}()
	for i := 1; i <= 2; i++ {
		hup <- syscall.SIGHUP
		deadline := time.Now().Add(5 * time.Second)
		for strings.Count(logs.String(), "SIGHUP: files reloaded") < i {
			if time.Now().After(deadline) {
				t.Fatalf("no reload line after signal %d:\n%s", i, logs.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	mu.Lock()
	got := strings.Join(calls, ",")
	mu.Unlock()
	if got != "rules,tls,tokens,rules,tls,tokens" {
		t.Errorf("reloads %s, want each item once a signal, in order", got)
	}
	out := logs.String()
	for _, want := range []string{"reloaded=\"[tls tokens]\"", "failed=[rules]", "bad line 3", "level=ERROR"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("reloadOnHangup did not end with its context")
	}
}

// TestReadRedisPassword: --redis-password-file's first line is the
// password (a trailing CR or LF dropped, nothing else trimmed); an empty
// first line, a missing file and a file without --redis-url are errors.
func TestReadRedisPassword(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, file, url, want, wantErr string
	}{
		{"one line", write("a", "s3cret\n"), "redis://h:1", "s3cret", ""},
		{"no newline", write("b", "s3cret"), "redis://h:1", "s3cret", ""},
		{"CRLF and more lines", write("c", "s3cret\r\nignored\n"), "redis://h:1", "s3cret", ""},
		{"spaces kept", write("d", " pass word \n"), "redis://h:1", " pass word ", ""},
		{"empty first line", write("e", "\nsecond\n"), "redis://h:1", "", "first line is empty"},
		{"empty file", write("f", ""), "redis://h:1", "", "first line is empty"},
		{"missing file", filepath.Join(dir, "nope"), "redis://h:1", "", "no such file"},
		{"no Redis", write("g", "s3cret\n"), "", "", "needs --redis-url"},
		{"no file", "", "redis://h:1", "", ""},
	} {
		f := serveFlags{redisPasswordFile: tc.file, redisConn: redisstore.ClientConfig{URL: tc.url}}
		err := f.readRedisPassword()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "--redis-password-file")):
			t.Errorf("%s: err %v, want one naming the flag and %q", tc.name, err, tc.wantErr)
		case f.redisConn.Password != tc.want:
			t.Errorf("%s: password %q, want %q", tc.name, f.redisConn.Password, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the password: %v", tc.name, err)
		}
	}
}
