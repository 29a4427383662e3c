package algorithms_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// TestAlgorithmNamesAgree pins the four places that name an algorithm to
// each other: this package (the config names), the proto enum, the Go
// client and the Lua scripts' numbers (lua/lib.lua's ALG_* constants).
func TestAlgorithmNamesAgree(t *testing.T) {
	lib, err := os.ReadFile("../store/redisstore/lua/lib.lua")
	if err != nil {
		t.Fatal(err)
	}
	// local ALG_A, ALG_B = 1, 2
	m := regexp.MustCompile(`(?m)^local (ALG_\w+(?:, ALG_\w+)*) = ([\d, ]+)$`).FindSubmatch(lib)
	if m == nil {
		t.Fatal("lua/lib.lua declares no ALG_* constants")
	}
	names, nums := strings.Split(string(m[1]), ", "), strings.Split(string(m[2]), ", ")
	lua := map[string]int32{}
	for i := range names {
		n, _ := strconv.Atoi(nums[i])
		lua[names[i]] = int32(n)
	}
	if len(lua) != len(algorithms.All()) {
		t.Errorf("lib.lua names %d algorithms, the Go code %d", len(lua), len(algorithms.All()))
	}
	if n := len(floodgatev1.Algorithm_name) - 1; n != len(algorithms.All()) {
		t.Errorf("the proto names %d algorithms, the Go code %d", n, len(algorithms.All()))
	}
	for _, a := range algorithms.All() {
		name := a.String()
		upper := strings.ToUpper(name)
		if v, ok := floodgatev1.Algorithm_value["ALGORITHM_"+upper]; !ok || v != int32(a) {
			t.Errorf("%s: proto ALGORITHM_%s = %d (present %v), want %d", name, upper, v, ok, a)
		}
		if got := client.Algorithm(a).String(); got != name {
			t.Errorf("%s: the client names %d %q", name, a, got)
		}
		if got, err := client.ParseAlgorithm(name); err != nil || int32(got) != int32(a) {
			t.Errorf("client.ParseAlgorithm(%q) = %d, %v; want %d", name, got, err, a)
		}
		if got, err := algorithms.ParseAlgorithm(name); err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q) = %d, %v; want %d", name, got, err, a)
		}
		if v, ok := lua["ALG_"+upper]; !ok || v != int32(a) {
			t.Errorf("%s: lib.lua ALG_%s = %d (present %v), want %d", name, upper, v, ok, a)
		}
	}
}
