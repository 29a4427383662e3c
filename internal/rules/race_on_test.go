//go:build race

package rules

// raceOn: the race detector is on, which makes the single-threaded
// parser about ten times slower without finding anything more.
const raceOn = true
