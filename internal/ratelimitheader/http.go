package ratelimitheader

import "net/http"

// SetHTTP sets on h the fields of one decision under l: Append's, or
// AppendDegraded's when the store could not decide (degraded), for the
// HTTP front doors (the client middleware and the server's HTTP/JSON API).
func SetHTTP(h http.Header, l Limit, s State, degraded bool) {
	var buf [8]Field
	fs := buf[:0]
	if degraded {
		fs = AppendDegraded(fs, s.Denied, s.RetryAfter)
	} else {
		fs = Append(fs, l, s)
	}
	for _, f := range fs {
		h.Set(f.Name, f.Value)
	}
}
