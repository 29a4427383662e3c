// Package auth checks callers: bearer tokens read from a file with their
// roles (TokenAuth, as a Gate tap on the gRPC port and for the HTTP/JSON
// API) and the gRPC port's TLS config with mTLS (NewTLSConfig). Both
// files are reloaded when they change, by internal/filewatch (see
// fileSet.watch), until their context ends or they are closed.
package auth
