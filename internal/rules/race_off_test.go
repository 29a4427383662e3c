//go:build !race

package rules

// raceOn: the race detector is off.
const raceOn = false
