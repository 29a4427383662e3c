package algorithms_test

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/algolua"
)

// TestAlgorithmNamesAgree pins the places that name an algorithm to each
// other: this package (the config names), the proto enum and the Lua
// scripts' numbers (algolua.Constants, which the Redis store declares
// before lua/lib.lua).
func TestAlgorithmNamesAgree(t *testing.T) {
	// local ALG_A, ALG_B = 1, 2
	m := regexp.MustCompile(`(?m)^local (ALG_\w+(?:, ALG_\w+)*) = ([\d, ]+)$`).FindStringSubmatch(algolua.Constants())
	if m == nil {
		t.Fatal("algolua.Constants declares no ALG_* constants")
	}
	names, nums := strings.Split(m[1], ", "), strings.Split(m[2], ", ")
	lua := map[string]int32{}
	for i := range names {
		n, _ := strconv.Atoi(nums[i])
		lua[names[i]] = int32(n)
	}
	if len(lua) != len(algorithms.All()) {
		t.Errorf("the Lua constants name %d algorithms, the Go code %d", len(lua), len(algorithms.All()))
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
		if got, want := a.Facts().Wire, floodgatev1.Algorithm(a).String(); got != want {
			t.Errorf("%s: Facts().Wire = %q, the proto names it %q", name, got, want)
		}
		if got, err := algorithms.ParseAlgorithm(name); err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q) = %d, %v; want %d", name, got, err, a)
		}
		if v, ok := lua["ALG_"+upper]; !ok || v != int32(a) {
			t.Errorf("%s: Lua ALG_%s = %d (present %v), want %d", name, upper, v, ok, a)
		}
	}
}

// TestEveryWireValueHasARow: every value of the proto enum but
// ALGORITHM_UNSPECIFIED is an algorithm of the table, with a Redis name of
// its own, so a value added to the proto without its row fails here
// rather than being decided as another algorithm.
func TestEveryWireValueHasARow(t *testing.T) {
	redis := map[string]algorithms.Algorithm{}
	for v, name := range floodgatev1.Algorithm_name {
		a := algorithms.Algorithm(v)
		if v == 0 {
			if a.Valid() {
				t.Errorf("%s is an algorithm", name)
			}
			continue
		}
		f := a.Facts()
		if !a.Valid() || f.Name == "" {
			t.Errorf("%s (%d) has no row in the table", name, v)
			continue
		}
		if f.Redis == "" {
			t.Errorf("%s: no Redis name", name)
		} else if other, dup := redis[f.Redis]; dup {
			t.Errorf("%s and %v share the Redis name %q", name, other, f.Redis)
		}
		redis[f.Redis] = a
		if err := (algorithms.Limit{Algorithm: a, Requests: 1, Period: time.Second}).Validate(); err != nil {
			t.Errorf("%s: 1 per second is invalid: %v", name, err)
		}
	}
	for _, a := range []algorithms.Algorithm{-1, 0, algorithms.Algorithm(len(floodgatev1.Algorithm_name))} {
		if a.Valid() || a.Facts() != (algorithms.Facts{}) {
			t.Errorf("%d: Valid or has facts, and is no algorithm", a)
		}
		if err := (algorithms.Limit{Algorithm: a, Requests: 1, Period: time.Second}).Validate(); !errors.Is(err, algorithms.ErrInvalidLimit) {
			t.Errorf("%d: Validate = %v, want ErrInvalidLimit", a, err)
		}
	}
}
