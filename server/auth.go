package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// adminMethods need a token marked admin.
var adminMethods = map[string]bool{
	floodgatev1.RateLimiter_Reset_FullMethodName: true,
}

// openServices answer without a token. Health is for probes (kubelet,
// load balancers, Envoy's health checker), which cannot carry a bearer
// token, and reports nothing secret. Reflection only describes the public
// API schema, so grpcurl can discover it; it decides nothing and touches no
// state. Turn reflection off (GRPCSettings.NoReflection) to hide it.
var openServices = map[string]bool{
	"grpc.health.v1.Health":                    true,
	"grpc.reflection.v1.ServerReflection":      true,
	"grpc.reflection.v1alpha.ServerReflection": true,
}

// TokenAuth checks bearer tokens ("authorization: Bearer <token>" metadata)
// on every gRPC call except health and reflection (see openServices). A
// missing or unknown token is answered codes.Unauthenticated; a valid token
// that is not an admin token calling floodgate.v1.RateLimiter/Reset is
// answered codes.PermissionDenied.
//
// The token file has one token per line, optionally followed by the word
// "admin":
//
//	# CI and the ops team may reset keys
//	3q2+7wE0fN2lK9...   admin
//	# services may only check
//	Zx81mPq0aa...
//
// Blank lines are ignored; a field starting with # begins a comment that
// runs to the end of the line (so a token cannot start with #). Tokens are
// printable ASCII without spaces (what gRPC metadata can carry); a token
// may appear only once. The file is re-read when it changes (see
// ReloadInterval); a file that does not parse, or lists no token, is logged
// and ignored, and the previous tokens stay in force.
//
// Tokens are kept only as SHA-256 digests and compared in constant time
// (crypto/subtle) against every known digest; no token is ever logged or
// put in an error.
type TokenAuth struct {
	files *fileReloader[tokenSet]
}

// tokenSet is one loaded generation of the token file.
type tokenSet struct {
	digests [][sha256.Size]byte
	admin   []bool // admin[i] is digests[i]'s role
	admins  int
}

// TokenAuthOption is an optional knob of NewTokenAuth.
type TokenAuthOption func(*tokenAuthOptions)

type tokenAuthOptions struct {
	log *slog.Logger
}

// WithAuthLogger sets where reloads and rejected token files are logged.
// The default is slog.Default().
func WithAuthLogger(log *slog.Logger) TokenAuthOption {
	return func(o *tokenAuthOptions) { o.log = log }
}

// NewTokenAuth loads tokenFile (format on TokenAuth). It fails when the
// file cannot be read, does not parse, or lists no token.
func NewTokenAuth(tokenFile string, opts ...TokenAuthOption) (*TokenAuth, error) {
	o := tokenAuthOptions{log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	t := &TokenAuth{}
	t.files = newFileReloader("auth tokens", []string{tokenFile}, o.log,
		func(contents [][]byte) (*tokenSet, error) { return parseTokens(tokenFile, contents[0]) },
		func(ts *tokenSet) []any {
			return []any{"file", tokenFile, "tokens", len(ts.digests), "admin_tokens", ts.admins}
		})
	if err := t.files.Reload(time.Now()); err != nil {
		return nil, err
	}
	return t, nil
}

// parseTokens reads a token file. Errors give file:line, never a token.
func parseTokens(name string, data []byte) (*tokenSet, error) {
	ts := &tokenSet{}
	seen := make(map[[sha256.Size]byte]int) // digest -> line
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(sc.Text())
		for i, f := range fields {
			if strings.HasPrefix(f, "#") {
				fields = fields[:i]
				break
			}
		}
		if len(fields) == 0 {
			continue
		}
		admin := false
		switch {
		case len(fields) == 2 && fields[1] == "admin":
			admin = true
		case len(fields) >= 2:
			return nil, fmt.Errorf("%s:%d: want a token optionally followed by \"admin\", got %d fields", name, line, len(fields))
		}
		tok := fields[0]
		for i := 0; i < len(tok); i++ {
			if c := tok[i]; c < 0x21 || c > 0x7e {
				return nil, fmt.Errorf("%s:%d: a token may hold only printable ASCII without spaces", name, line)
			}
		}
		d := sha256.Sum256([]byte(tok))
		if prev, ok := seen[d]; ok {
			return nil, fmt.Errorf("%s:%d: duplicate token (first on line %d)", name, line, prev)
		}
		seen[d] = line
		ts.digests = append(ts.digests, d)
		ts.admin = append(ts.admin, admin)
		if admin {
			ts.admins++
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(ts.digests) == 0 {
		return nil, fmt.Errorf("%s: no tokens (every call would be refused)", name)
	}
	return ts, nil
}

// lookup reports whether token is known and whether it is an admin token.
// It compares the token's digest with every digest, in constant time, so
// the time taken says nothing about which token (if any) matched.
func (ts *tokenSet) lookup(token string) (ok, admin bool) {
	d := sha256.Sum256([]byte(token))
	match, adm := 0, 0
	for i := range ts.digests {
		eq := subtle.ConstantTimeCompare(d[:], ts.digests[i][:])
		match |= eq
		adm |= eq & b2i(ts.admin[i])
	}
	return match == 1, adm == 1
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// errBadToken is what a wrong token gets; it says nothing about the token.
var errBadToken = status.Error(codes.Unauthenticated, "invalid bearer token")

// authenticate is the auth.AuthFunc: it runs for every call but health and
// reflection.
func (t *TokenAuth) authenticate(ctx context.Context) (context.Context, error) {
	token, err := auth.AuthFromMD(ctx, "bearer")
	if err != nil {
		return nil, err // codes.Unauthenticated
	}
	ok, admin := t.files.Get(time.Now()).lookup(token)
	if !ok {
		return nil, errBadToken
	}
	if method, _ := grpc.Method(ctx); adminMethods[method] && !admin {
		return nil, status.Errorf(codes.PermissionDenied, "%s needs an admin token", method)
	}
	return ctx, nil
}

// needsToken is the selector: every service but the open ones.
var needsToken = selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
	return !openServices[c.Service]
})

// UnaryInterceptor checks tokens on unary calls. Put it after the metrics
// interceptor, so refused calls are counted.
func (t *TokenAuth) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return selector.UnaryServerInterceptor(auth.UnaryServerInterceptor(t.authenticate), needsToken)
}

// StreamInterceptor checks tokens on streaming calls.
func (t *TokenAuth) StreamInterceptor() grpc.StreamServerInterceptor {
	return selector.StreamServerInterceptor(auth.StreamServerInterceptor(t.authenticate), needsToken)
}

// Reload re-reads the token file now, whether or not it changed (for
// SIGHUP). On error the previous tokens stay in force.
func (t *TokenAuth) Reload() error { return t.files.Reload(time.Now()) }

// Tokens returns how many tokens, and how many admin tokens, are in force.
func (t *TokenAuth) Tokens() (total, admins int) {
	ts := t.files.Current()
	return len(ts.digests), ts.admins
}
