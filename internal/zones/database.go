package zones

import (
	"archive/zip"
	"bytes"
	_ "embed" // the zone database
	"fmt"
	"io"
	"sync"
	"time"
)

// database is the IANA zone database floodgate resolves every zone with:
// Go's lib/time/zoneinfo.zip, copied by go generate. Not the host's, which
// time.LoadLocation prefers and whose version differs between hosts: two
// replicas on one store could then disagree on calendar boundaries and
// together admit several times the quota.
//
//go:generate sh -c "cp \"$(go env GOROOT)/lib/time/zoneinfo.zip\" zoneinfo.zip"
//go:embed zoneinfo.zip
var database []byte

// openDatabase opens database once.
var openDatabase = sync.OnceValues(func() (*zip.Reader, error) {
	return zip.NewReader(bytes.NewReader(database), int64(len(database)))
})

// loadEmbedded resolves name (spelled as an IANA name: hostDependent is
// false) from database.
func loadEmbedded(name string) (*time.Location, error) {
	zr, err := openDatabase()
	if err != nil {
		return nil, fmt.Errorf("the embedded zone database: %w", err)
	}
	f, err := zr.Open(name)
	if err != nil {
		return nil, fmt.Errorf("zone %q: %w", name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("zone %q: %w", name, err)
	}
	loc, err := time.LoadLocationFromTZData(name, data)
	if err != nil {
		return nil, fmt.Errorf("zone %q: %w", name, err)
	}
	return loc, nil
}
