package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/redistest"
)

// TestReferenceLogsNoPasswords: started from the reference's environment
// with Redis passwords (REDIS_AUTH on TCP, REDIS_PERSECOND_AUTH as
// user:password on a unix socket), the log says which flags the
// environment gave, with every password masked.
func TestReferenceLogsNoPasswords(t *testing.T) {
	r := redistest.StartServer(t)
	const main, perSecond = "main-pw-Zr81q", "persec-pw-Kq03x"
	if err := r.Client().Do(context.Background(), "CONFIG", "SET", "requirepass", main).Err(); err != nil {
		t.Fatal(err)
	}
	p := startAsReference(t, referenceEnv(t, map[string]string{"ps.yaml": perSecondRules}, map[string]string{
		"REDIS_SOCKET_TYPE":           "tcp",
		"REDIS_URL":                   r.Addr(),
		"REDIS_AUTH":                  main,
		"REDIS_PERSECOND":             "true",
		"REDIS_PERSECOND_SOCKET_TYPE": "unix",
		"REDIS_PERSECOND_URL":         filepath.Join(t.TempDir(), "persecond.sock"),
		"REDIS_PERSECOND_AUTH":        "rl:" + perSecond,
	}))
	logs := p.logs.String()
	if !strings.Contains(logs, "--redis-url=redis://:xxxxx@") || !strings.Contains(logs, "--redis-persecond-url=unix://rl:xxxxx@") {
		t.Errorf("the start-up line does not show both Redis URLs, masked:\n%s", logs)
	}
	for _, pw := range []string{main, perSecond} {
		if strings.Contains(logs, pw) {
			t.Errorf("the log shows the password %q:\n%s", pw, logs)
		}
	}
}
