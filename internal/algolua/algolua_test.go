package algolua_test

import (
	"os"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/algolua"
)

// TestLibDeclaresTheTable: the Redis scripts' library declares exactly the
// constants the table generates, so a row added in Go is a number Lua
// knows by the same name.
func TestLibDeclaresTheTable(t *testing.T) {
	lib, err := os.ReadFile("../../store/redisstore/lua/lib.lua")
	if err != nil {
		t.Fatal(err)
	}
	want := algolua.Constants()
	if !strings.Contains(string(lib), want) {
		t.Errorf("lua/lib.lua does not declare the table's constants; want the line\n%s", want)
	}
	if !strings.HasPrefix(want, "local ALG_TOKEN_BUCKET, ") {
		t.Errorf("Constants() = %q, want it to open with the first algorithm", want)
	}
}
