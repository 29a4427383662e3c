package docblocks

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRepositoryDocsExtract: the repository's own Markdown parses (marks,
// fences and languages all known), so a doc edit that the e2e doc test
// would refuse fails already under go test -short.
func TestRepositoryDocsExtract(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md", "../../deploy/README.md")
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := Extract(f, string(b))
		if err != nil {
			t.Error(err)
		}
		n += len(blocks)
	}
	if n < 10 {
		t.Fatalf("found %d shell blocks in %d files; the docs have more", n, len(files))
	}
}
