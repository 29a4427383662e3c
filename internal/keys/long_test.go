package keys

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
)

// TestLongFields: a value above maxLiteralField is written as its digest,
// so a key stays short whatever a client sends, and never meets a literal
// field or another long value.
func TestLongFields(t *testing.T) {
	long := strings.Repeat("v", maxLiteralField+1)
	sum := sha256.Sum256([]byte(long))
	digest := "#" + base64.RawURLEncoding.EncodeToString(sum[:])
	tests := []struct {
		name  string
		value string
		want  string
	}{
		{"at the bound: literal", strings.Repeat("a", maxLiteralField), "|256:" + strings.Repeat("a", maxLiteralField)},
		{"one above: digest", long, digest},
		{"a megabyte: still 44 bytes", strings.Repeat("x", 1<<20), "#" + b64sum(strings.Repeat("x", 1<<20))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(AppendField(nil, tt.value)); got != tt.want {
				t.Fatalf("AppendField(%d bytes) = %.60q, want %.60q", len(tt.value), got, tt.want)
			}
		})
	}
	if n := len(AppendField(nil, strings.Repeat("x", 1<<20))); n != 44 {
		t.Errorf("a long field takes %d bytes, want 44", n)
	}
	// Values differing in their last byte, or sharing a digest's text as
	// a literal, stay apart.
	a, b := long, long[:len(long)-1]+"w"
	pairs := [][2]string{{a, b}, {a, digest}, {a, long + "v"}, {digest[1:], a}}
	for _, p := range pairs {
		if string(AppendField(nil, p[0])) == string(AppendField(nil, p[1])) {
			t.Errorf("%.20q… and %.20q… share a field", p[0], p[1])
		}
	}
}

func b64sum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// TestOverrideUnitNamespace: an override counted per unit never meets one
// counted per rate, nor a rule's key.
func TestOverrideUnitNamespace(t *testing.T) {
	unit := string(AppendOverrideUnit(nil, "edge", 2))
	if unit != "O|4:edge2" {
		t.Errorf("AppendOverrideUnit = %q, want O|4:edge2", unit)
	}
	for _, other := range []string{string(AppendOverride(nil, "edge", 2, 2)), string(AppendEnvoy(nil, "edge2")), Check("O|4:edge2")} {
		if other == unit || other[0] == unit[0] {
			t.Errorf("%q meets %q", other, unit)
		}
	}
}
