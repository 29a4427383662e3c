package redisstore

// late is lib.lua's LATE, a decide call's whole reply when Redis started
// it after its deadline.
const late = "!"
