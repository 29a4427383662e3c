//go:build !race

package config

// raceOn: the race detector is off.
const raceOn = false
