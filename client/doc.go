// Package client is the Go client of floodgate's Check API; the net/http
// middleware (client/httplimit) and the gRPC server interceptors
// (client/grpclimit) are built on it.
//
// # The client
//
// Dial a floodgate and check keys against inline limits or named policies:
//
//	c, err := client.Dial("127.0.0.1:8081")
//	...
//	perUser := client.Limit{Algorithm: algorithms.TokenBucket, Requests: 60, Period: time.Minute, Burst: 600}
//	d, err := c.Check(ctx, client.Request{Key: "user:42", Limit: perUser})
//	if !d.Allowed { /* wait d.RetryAfter */ }
//
//	d, err = c.Check(ctx, client.Request{Key: "login:alice", Limit: client.Policy("login")})
//	d, err = c.Check(ctx, client.Request{Key: "export:acme", Limit: perUser, Cost: 10})
//
// A Request is one check, for Check, Peek and CheckBatch alike; its Cost
// (default 1) is the one way to spend more than one unit.
//
// A limit's Algorithm is one of the algorithms package's (algorithms.All).
// An algorithm that waits answers with a slot rather than a deny:
// Decision.Wait is how long the admitted request must wait. Wait takes a
// slot and sleeps until it starts, as golang.org/x/time/rate's Wait does,
// or fails at once if the slot would start after the context's deadline:
//
//	partner := client.Limit{Algorithm: algorithms.LeakyBucket, Requests: 10, Period: time.Second}
//	if err := c.Wait(ctx, "partner:acme", partner); err != nil { return err }
//
// Being over the limit is a Decision with Allowed false; an error means
// floodgate could not decide and wraps the gRPC status, so status.Code(err)
// tells InvalidArgument (a bad limit or key), NotFound (an unknown policy),
// Unavailable or DeadlineExceeded apart.
//
// New wraps a connection you already have and takes the Options
// WithTimeout and WithToken. WithTLS and WithDialOptions are DialOptions,
// which only Dial takes (they configure the connection Dial opens): giving
// one to New does not compile.
//
// Dial's defaults suit a decision on a request path:
//
//   - plaintext, unless WithTLS: right for a sidecar or loopback floodgate;
//     use TLS for anything crossing a network. WithToken adds a bearer
//     token and is refused over plaintext to a non-loopback address.
//   - every call bounded by DefaultTimeout (100ms; WithTimeout changes it);
//   - no retries, even if a resolver's service config enables them,
//     because a Check whose reply was lost may already have been charged,
//     and a retry would charge it twice. The caller's failure mode decides
//     instead.
//   - no waiting for a connection (gRPC's default): an unreachable
//     floodgate fails the call at once with Unavailable.
//
// # Middleware
//
// Two packages build on the client, as sethvargo/go-limiter's httplimit
// builds on its limiter: client/httplimit limits a net/http server's
// requests by client IP and API key, client/grpclimit a gRPC server's calls
// by a key function. Both answer with the same header scheme floodgate's
// Envoy API writes, and both take a FailureMode for when floodgate cannot
// decide.
package client
