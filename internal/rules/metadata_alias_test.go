package rules

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// aliasedMetadataConfig is a small file whose descriptors' metadata all
// alias one mapping of about 8,400 nodes built from nested anchors.
func aliasedMetadataConfig(descriptors int) string {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n  - key: k\n    value: v0\n    metadata:\n      a: &a {")
	for i := range 20 {
		fmt.Fprintf(&b, "f%d: x, ", i)
	}
	b.WriteString("}\n      b: &b {")
	for i := range 20 {
		fmt.Fprintf(&b, "g%d: *a, ", i)
	}
	b.WriteString("}\n      c: &big {")
	for i := range 10 {
		fmt.Fprintf(&b, "h%d: *b, ", i)
	}
	b.WriteString("}\n")
	for i := 1; i <= descriptors; i++ {
		fmt.Fprintf(&b, "  - key: k\n    value: v%d\n    metadata: *big\n", i)
	}
	return b.String()
}

// TestMetadataAliasesChargeTheFile: metadata reached through aliases is
// charged to the file's alias budget, so a file of a few KB whose
// descriptors all alias one large mapping is refused at the alias that
// goes too far, having allocated memory in proportion to the budget, not
// to the expansion (about 1 GB for 1,000 such descriptors); a few such
// aliases load.
func TestMetadataAliasesChargeTheFile(t *testing.T) {
	if _, err := Parse("few.yaml", []byte(aliasedMetadataConfig(3))); err != nil {
		t.Fatalf("3 aliased metadata: %v", err)
	}
	data := []byte(aliasedMetadataConfig(200))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Parse("many.yaml", data)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "many.yaml:") || !strings.Contains(err.Error(), "metadata: aliases expand too far") {
		t.Errorf("%d bytes with 200 aliased metadata: %v, want refused at the alias's position", len(data), err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("parsing %d bytes allocated %d MB, want at most 64", len(data), alloc>>20)
	}
}
