package algolua_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/algolua"
)

// TestConstantsAreTheTable: the algorithms' Lua numbers come from the
// table alone: Constants declares every algorithm, and the Redis
// scripts' library declares none of its own, so a row added in Go is a
// number Lua knows by the same name.
func TestConstantsAreTheTable(t *testing.T) {
	lib, err := os.ReadFile("../../store/redisstore/lua/lib.lua")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^local ALG_\w+.*$`).Find(lib); m != nil {
		t.Errorf("lua/lib.lua declares algorithm numbers of its own: %s", m)
	}
	want := algolua.Constants()
	if !strings.HasPrefix(want, "local ALG_TOKEN_BUCKET, ") {
		t.Errorf("Constants() = %q, want it to open with the first algorithm", want)
	}
}
