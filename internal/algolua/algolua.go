// Package algolua writes the Lua constants of the algorithm table
// (algorithms.Facts): the line the Redis store's scripts open with, so
// that Lua names each algorithm by the number Go sends, from one source.
package algolua

import (
	"strconv"
	"strings"

	"github.com/floodgate/floodgate/algorithms"
)

// Constants is the Lua declaration of every algorithm's number, in enum
// order, as one line: "local ALG_A, ALG_B = 1, 2", each named ALG_ and
// the algorithm's config name in upper case.
func Constants() string {
	var names, nums []string
	for _, a := range algorithms.All() {
		names = append(names, "ALG_"+strings.ToUpper(a.String()))
		nums = append(nums, strconv.Itoa(int(a)))
	}
	return "local " + strings.Join(names, ", ") + " = " + strings.Join(nums, ", ") + "\n"
}
