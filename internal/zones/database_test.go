package zones

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestLoadIgnoresTheHostDatabase: two replicas on one store must agree on
// a calendar period's boundaries, so a zone's rules must not depend on the
// host's zone database (a distroless image next to a Debian one, a rolling
// tzdata upgrade). A child process sees a host database ($ZONEINFO, read
// by time.LoadLocation before the system's and the embedded copy) in
// which Asia/Almaty is Asia/Dhaka's +06; Load must still give floodgate's
// own Asia/Almaty.
func TestLoadIgnoresTheHostDatabase(t *testing.T) {
	if os.Getenv("FLOODGATE_ZONES_CHILD") == "1" {
		loc, err := Load("Asia/Almaty")
		if err != nil {
			t.Fatal(err)
		}
		_, off := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).In(loc).Zone()
		if want := offsetOf(t, "Asia/Almaty"); off != want {
			t.Fatalf("Asia/Almaty is UTC%+d h under a host database that says +6, want floodgate's UTC%+d h", off/3600, want/3600)
		}
		return
	}
	if offsetOf(t, "Asia/Almaty") == offsetOf(t, "Asia/Dhaka") {
		t.Skip("the embedded database gives Almaty and Dhaka one offset; the fake would not differ")
	}
	fake := filepath.Join(t.TempDir(), "zoneinfo.zip")
	writeFakeDatabase(t, fake, "Asia/Almaty", embeddedZone(t, "Asia/Dhaka"))
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoadIgnoresTheHostDatabase$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FLOODGATE_ZONES_CHILD=1", "ZONEINFO="+fake)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// offsetOf is name's UTC offset in seconds on 2026-12-01, by the embedded
// database.
func offsetOf(t *testing.T, name string) int {
	t.Helper()
	loc, err := time.LoadLocationFromTZData(name, embeddedZone(t, name))
	if err != nil {
		t.Fatal(err)
	}
	_, off := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).In(loc).Zone()
	return off
}

// embeddedZone is name's file in the embedded database.
func embeddedZone(t *testing.T, name string) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(database), int64(len(database)))
	if err != nil {
		t.Fatal(err)
	}
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

// writeFakeDatabase writes a zone database holding data as name, stored
// uncompressed as time.LoadLocation's $ZONEINFO reader wants.
func writeFakeDatabase(t *testing.T, path, name string, data []byte) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}
