//go:build race

package redisstore

// raceOn: the race detector is on, which makes the differential traces'
// steps (a Redis round trip and the Go model each) about five times slower.
const raceOn = true
