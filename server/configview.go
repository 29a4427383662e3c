package server

import (
	"context"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/internal/configview"
	"github.com/floodgate/floodgate/internal/rules"
)

// This file serves GET /debug/config: the live rules as JSON, each with
// where it was defined, and when they were loaded. The views are also the
// JSON of `floodgate config explain --json`, so a rule reads the same in
// both.

// AdminAuthorizer checks the Authorization header of an admin-only
// endpoint. *auth.TokenAuth is one: its errors carry
// codes.Unauthenticated (answered 401) or codes.PermissionDenied (403).
type AdminAuthorizer interface {
	AuthorizeAdmin(ctx context.Context, authorization string) error
}

// adminOnly serves h behind authz when it is set: a request then needs
// "Authorization: Bearer <token>" with an admin token (or HTTP Basic auth
// with the token as the password, any user name, which is how a browser
// opening the page at / sends it), else it answers 401 (no known token,
// with WWW-Authenticate challenges for both) or 403 (a token that is not
// an admin one) and h never runs.
func adminOnly(authz AdminAuthorizer, h http.Handler) http.Handler {
	if authz == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		authorization := r.Header.Get("Authorization")
		if _, password, ok := r.BasicAuth(); ok {
			authorization = "Bearer " + password
		}
		if err := authz.AuthorizeAdmin(r.Context(), authorization); err != nil {
			code := http.StatusUnauthorized
			if status.Code(err) == codes.PermissionDenied {
				code = http.StatusForbidden
			} else {
				w.Header().Add("WWW-Authenticate", `Bearer realm="floodgate admin"`)
				w.Header().Add("WWW-Authenticate", `Basic realm="floodgate admin", charset="UTF-8"`)
			}
			http.Error(w, status.Convert(err).Message(), code)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// debugConfig serves GET /debug/config (NewAdminHandler puts it behind
// adminOnly).
func debugConfig(src RuleSource) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var c *rules.Set
		if src != nil {
			c = src.Current()
		}
		writeJSON(w, configview.New(c))
	}
}
