package testkit

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/algorithms"
)

// maxFilesNaming is how many product files may name any one algorithm:
// its table row, its doc, its Go math, its Lua function, the Redis
// store's table and the public constants, with a little room. Every
// other layer reads the algorithm's facts from the table.
const maxFilesNaming = 10

// TestAlgorithmsNamedInFewFiles: no algorithm is named, in code or in a
// comment, by more than maxFilesNaming product files (the module's Go and
// Lua outside tests, testdata, gen/, bench/, deploy/ and e2e/), so that
// an algorithm's facts stay in its table row and adding one touches its
// own files, not every layer. An algorithm is spelled as its table name's
// words joined by anything or nothing ("token_bucket", "TokenBucket",
// "token bucket", "token-bucket"), a name of three words also as its first
// and last ("slidinglog"); where one name begins another
// ("sliding_window", "sliding_window_log"), a match of the longer one
// counts for it alone.
func TestAlgorithmsNamedInFewFiles(t *testing.T) {
	root := "../.."
	type spelling struct {
		name string
		re   *regexp.Regexp
	}
	var spellings []spelling
	for _, a := range algorithms.All() {
		words := strings.Split(a.String(), "_")
		alts := []string{strings.Join(words, ".?")}
		if len(words) >= 3 {
			alts = append(alts, words[0]+".?"+words[len(words)-1])
		}
		spellings = append(spellings, spelling{a.String(), regexp.MustCompile(`(?i)` + strings.Join(alts, "|"))})
	}
	// longer[i] are the spellings of names that begin with spellings[i]'s.
	longer := make([][]*regexp.Regexp, len(spellings))
	for i, s := range spellings {
		for _, o := range spellings {
			if o.name != s.name && strings.HasPrefix(o.name, s.name+"_") {
				longer[i] = append(longer[i], regexp.MustCompile(`^(?:`+o.re.String()+`)`))
			}
		}
	}
	naming := make([][]string, len(spellings)) // per spelling, the files naming it
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case d.Name() == ".git", d.Name() == "node_modules", d.Name() == "testdata",
				rel == "gen", rel == "bench", rel == "deploy", rel == "e2e":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, "_test.go") || !(strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".lua")) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, s := range spellings {
			if names(b, s.re, longer[i]) {
				naming[i] = append(naming[i], filepath.ToSlash(rel))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range spellings {
		if len(naming[i]) == 0 {
			t.Errorf("%s: no product file names it; does the walk start at the module's root?", s.name)
		}
		if len(naming[i]) > maxFilesNaming {
			t.Errorf("%s is named by %d product files, more than %d; read its facts from the algorithms table instead:\n\t%s",
				s.name, len(naming[i]), maxFilesNaming, strings.Join(naming[i], "\n\t"))
		}
	}
}

// names reports whether b holds a match of re that is not the beginning
// of a match of one of longer.
func names(b []byte, re *regexp.Regexp, longer []*regexp.Regexp) bool {
	for _, m := range re.FindAllIndex(b, -1) {
		own := true
		for _, l := range longer {
			if l.Match(b[m[0]:]) {
				own = false
				break
			}
		}
		if own {
			return true
		}
	}
	return false
}
