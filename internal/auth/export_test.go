package auth

// NewTLSConfigWithReloader exposes newTLSConfig to the external tests,
// which check the reloader's view of the files.
var NewTLSConfigWithReloader = newTLSConfig
