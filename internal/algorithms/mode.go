package algorithms

// Mode changes how one request is decided; the zero Mode is the plain
// decision. Modes are bits, so they combine.
type Mode uint8

// NoWait admits a leaky-bucket request only if it may start now (its Wait
// would be 0); a request that would have to queue is denied, with
// RetryAfter until the queue is empty. For a caller that cannot hold a
// request, such as Envoy's ShouldRateLimit. Every other algorithm ignores
// it (they never wait).
const NoWait Mode = 1 << 2
