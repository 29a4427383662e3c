//go:build !race

package redisstore

// raceOn: the race detector is off.
const raceOn = false
