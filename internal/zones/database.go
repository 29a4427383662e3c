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
// Go's lib/time/zoneinfo.zip (the one time/tzdata embeds), copied here by
// go generate. Not the host's: time.LoadLocation prefers $ZONEINFO and
// the system's /usr/share/zoneinfo, whose version differs between hosts
// (a distroless image next to a Debian one, a rolling tzdata upgrade), so
// that two replicas on one store could compute different calendar
// boundaries for one zone, read each other's windows as another period's
// and together admit several times the quota. With one database in the
// binary, every replica of a build agrees; a build with another
// database is a new floodgate version, rolled out like any other.
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
