package zones

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestLoad(t *testing.T) {
	long := strings.Repeat("Asia/", 1<<18)
	if _, err := Load(long); err == nil || !strings.HasPrefix(err.Error(), "unknown time zone") || len(err.Error()) > 200 {
		t.Errorf("Load(1 MiB name) = %.200v, want a short error", err)
	}
	for _, tc := range []struct {
		name, want string // want "" for an error
	}{
		{"", "UTC"}, {"UTC", "UTC"}, {"Asia/Jakarta", "Asia/Jakarta"}, {"America/New_York", "America/New_York"},
		{"Mars/Olympus", ""}, {"Local", ""}, {"America/Argentina/ComodRivadavia", "America/Argentina/ComodRivadavia"}, {"../../../etc/passwd", ""}, {"/etc/localtime", ""}, {"asia/jakarta\x00", ""},
		// Files of the host's zone directory, whose meaning differs between hosts.
		{"localtime", ""}, {"posixrules", ""}, {"./UTC", ""}, {"Etc/../UTC", ""}, {"Etc//UTC", ""}, {"Etc/UTC/", ""},
		{"posix/UTC", ""}, {"right/UTC", ""}, {"posix/Europe/Berlin", ""}, {"zone.tab", ""}, {"tzdata.zi", ""}, {"Factory", ""},
		{"asia/Jakarta", ""}, {"Asia/jakarta", ""}, {"Asia/Jakarta ", ""}, {"Asia/Ja.karta", ""}, {"E.ST", ""}, {"Etc/U.TC", ""},
		// Real IANA names using every character the rule allows.
		{"Etc/GMT+5", "Etc/GMT+5"}, {"Etc/GMT-14", "Etc/GMT-14"}, {"America/Port-au-Prince", "America/Port-au-Prince"},
		{"EST5EDT", "EST5EDT"}, {"America/Argentina/Buenos_Aires", "America/Argentina/Buenos_Aires"}, {"Etc/UTC", "Etc/UTC"}, {"GMT0", "GMT0"},
	} {
		loc, err := Load(tc.name)
		switch {
		case tc.want == "" && (err == nil || !strings.HasPrefix(err.Error(), "unknown time zone") || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.name))):
			t.Errorf("Load(%q) = %v, %v; want an error naming the zone", tc.name, loc, err)
		case tc.want != "" && (err != nil || loc.String() != tc.want):
			t.Errorf("Load(%q) = %v, %v; want %s", tc.name, loc, err, tc.want)
		}
	}
}

// TestLoadRefusesHostFiles: names not spelled as IANA names are refused
// for what they are (a file of this host's zone directory), before the
// zone database is asked, whether or not this host has such a file.
func TestLoadRefusesHostFiles(t *testing.T) {
	for _, name := range []string{"localtime", "posixrules", "./UTC", "Etc/../UTC", "Etc//UTC", "Etc/UTC/", "/UTC",
		"posix/UTC", "right/UTC", "zone.tab", "Factory", "E.ST", "Etc/U.TC", "Asia/Ja.karta", "Asia/Jakarta ", "Etc/GMT*5", "Asia/Jakart\u00e4"} {
		if _, err := Load(name); err == nil || !strings.HasPrefix(err.Error(), "unknown time zone") || !strings.Contains(err.Error(), "zone directory") {
			t.Errorf("Load(%q) = %v; want it refused as a host file", name, err)
		}
	}
	for _, name := range []string{"Mars/Olympus", "Etc/GMT+5", "America/Port-au-Prince", "EST5EDT", "America/Argentina/Buenos_Aires"} {
		if _, err := Load(name); err != nil && strings.Contains(err.Error(), "zone directory") {
			t.Errorf("Load(%q) = %v; an IANA-spelled name refused as a host file", name, err)
		}
	}
}

// The cache answers like Load, under concurrent callers, and stays bounded
// whatever names a hostile caller sends.
func TestCache(t *testing.T) {
	var c Cache
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				name := "Asia/Jakarta"
				if i%2 == 1 {
					name = fmt.Sprintf("Junk/%d-%d", g, i)
				}
				loc, err := c.Load(name)
				if (err == nil) != (i%2 == 0) || (err == nil && loc.String() != name) {
					t.Errorf("Load(%q) = %v, %v", name, loc, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := len(c.m); n > MaxCached {
		t.Errorf("cache holds %d names, more than %d", n, MaxCached)
	}
	// Full: a new name is still resolved, just not kept.
	if loc, err := c.Load("Europe/Berlin"); err != nil || loc.String() != "Europe/Berlin" {
		t.Errorf("Load on a full cache = %v, %v", loc, err)
	}
	if a, _ := c.Load("Asia/Jakarta"); a != c.m["Asia/Jakarta"].loc {
		t.Errorf("a cached zone is resolved again")
	}
}
