package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/redistest"
)

// TestCalendarReplicasWithOtherZoneDatabases: two replicas on one Redis,
// one on a host whose zone database says Asia/Almaty is +06 (Asia/Dhaka's
// rules under Almaty's name, the database before Almaty moved to +05),
// the other on the usual one. A daily quota of 3 in Asia/Almaty, checked
// on both in turn, admits 3 in all: the replicas compute the same day
// from the database in the binary, not 3 on each with every write
// resetting the other's window.
func TestCalendarReplicasWithOtherZoneDatabases(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "zoneinfo.zip")
	writeZoneDatabase(t, fake, "Asia/Almaty", goZone(t, "Asia/Dhaka"))
	r := redistest.StartServer(t)
	args := []string{"--redis-url", "redis://" + r.Addr(), "--redis-timeout", "2s"}
	t.Setenv("ZONEINFO", fake)
	a := startServe(t, args...)
	t.Setenv("ZONEINFO", "")
	b := startServe(t, args...)
	clients := []floodgatev1.RateLimiterClient{a.Client(t), b.Client(t)}
	check := &floodgatev1.CheckRequest{Key: "daily", Algorithm: floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW,
		Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 3, Calendar: floodgatev1.Calendar_CALENDAR_DAY, TimeZone: "Asia/Almaty"}}}
	allowed := 0
	for i := range 12 {
		resp, err := clients[i%2].Check(context.Background(), check)
		if err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
		if resp.Degraded {
			t.Fatalf("check %d: degraded: %v", i, resp)
		}
		if resp.Allowed {
			allowed++
		}
	}
	if allowed != 3 {
		t.Errorf("two replicas admitted %d of a daily quota of 3", allowed)
	}
}

// goZone is name's file in the zone database the binary embeds (a copy
// of the Go toolchain's).
func goZone(t *testing.T, name string) []byte {
	t.Helper()
	zr, err := zip.OpenReader(filepath.Join("..", "internal", "zones", "zoneinfo.zip"))
	if err != nil {
		t.Fatalf("the embedded zone database: %v", err)
	}
	defer zr.Close()
	f, err := zr.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeZoneDatabase writes a $ZONEINFO database holding data as name
// (stored uncompressed, as Go's reader of it wants).
func writeZoneDatabase(t *testing.T, path, name string, data []byte) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
	if err == nil {
		_, err = w.Write(data)
	}
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = os.WriteFile(path, buf.Bytes(), 0o600)
	}
	if err != nil {
		t.Fatal(fmt.Errorf("fake zone database: %w", err))
	}
}
