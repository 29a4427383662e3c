package auth

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	grpcauth "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/filewatch"
)

// adminMethods need a token marked admin.
var adminMethods = map[string]bool{
	floodgatev1.RateLimiter_Reset_FullMethodName: true,
}

// openServices answer without a token: health is for probes, which cannot
// carry one, and reflection only describes the public schema.
var openServices = map[string]bool{
	healthpb.Health_ServiceDesc.ServiceName:                    true,
	reflectionv1.ServerReflection_ServiceDesc.ServiceName:      true,
	reflectionv1alpha.ServerReflection_ServiceDesc.ServiceName: true,
}

// TokenAuth checks bearer tokens on every gRPC call except health and
// reflection: a missing or unknown token is codes.Unauthenticated, a
// token without the role a method needs codes.PermissionDenied. The token
// file's format and roles are docs/security.md's. It runs when a call's
// headers arrive, in the server's Gate (TransportLimits.Auth, whose tap
// calls Tap).
//
// The file is reloaded when it changes; one that does not parse, or lists
// no token, is logged and ignored. Tokens are kept only as SHA-256
// digests, compared in constant time, never logged.
type TokenAuth struct {
	files *filewatch.Watcher[tokenSet]
}

// tokenSet is one loaded generation of the token file.
type tokenSet struct {
	digests [][sha256.Size]byte
	roles   []grant // roles[i] is digests[i]'s
	admins  int
}

// grant is what an authenticated call may do beyond the ordinary calls.
// Authentication stores it in the call's context (see grantFrom).
type grant struct {
	admin  bool // may Reset, and refund
	refund bool // may refund (Envoy's is_negative_hits)
}

// grantKey is the context key of a call's grant.
type grantKey struct{}

// grantFrom returns the grant authentication stored in ctx, and false when
// the call was not authenticated (no TokenAuth is configured).
func grantFrom(ctx context.Context) (grant, bool) {
	g, ok := ctx.Value(grantKey{}).(grant)
	return g, ok
}

// RefundAllowed reports whether the call of ctx may give hits back: when
// tokens are not configured, or its token has the refund or admin role.
func RefundAllowed(ctx context.Context) bool {
	g, ok := grantFrom(ctx)
	return !ok || g.admin || g.refund
}

// ResetAllowed reports whether the call of ctx may Reset: when tokens are
// not configured, or its token has the admin role.
func ResetAllowed(ctx context.Context) bool {
	g, ok := grantFrom(ctx)
	return !ok || g.admin
}

// NewTokenAuth loads tokenFile (format on TokenAuth) and reloads it when
// it changes, until ctx ends or Close is called; log (nil: slog.Default())
// receives reloads and rejected token files. It fails when the file
// cannot be read, does not parse, or lists no token.
func NewTokenAuth(ctx context.Context, tokenFile string, log *slog.Logger) (*TokenAuth, error) {
	files, err := fileSet[tokenSet]{
		name:  "auth tokens",
		paths: []string{tokenFile},
		parse: func(contents [][]byte) (*tokenSet, error) { return parseTokens(tokenFile, contents[0]) },
		describe: func(ts *tokenSet) []any {
			return []any{"file", tokenFile, "tokens", len(ts.digests), "admin_tokens", ts.admins}
		},
	}.watch(ctx, cmp.Or(log, slog.Default()))
	if err != nil {
		return nil, err
	}
	return &TokenAuth{files: files}, nil
}

// parseTokens reads a token file: each token (printable ASCII, no spaces,
// listed once) and its roles; # starts a comment. Errors give file:line,
// never a token.
func parseTokens(name string, data []byte) (*tokenSet, error) {
	ts := &tokenSet{}
	seen := make(map[[sha256.Size]byte]int) // digest -> line
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(sc.Text())
		if i := slices.IndexFunc(fields, func(f string) bool { return strings.HasPrefix(f, "#") }); i >= 0 {
			fields = fields[:i]
		}
		if len(fields) == 0 {
			continue
		}
		var g grant
		for _, role := range fields[1:] {
			switch {
			case role == "admin" && !g.admin:
				g.admin = true
			case role == "refund" && !g.refund:
				g.refund = true
			default:
				return nil, fmt.Errorf("%s:%d: want a token optionally followed by the roles \"admin\" and \"refund\", each at most once", name, line)
			}
		}
		tok := fields[0]
		if strings.ContainsFunc(tok, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
			return nil, fmt.Errorf("%s:%d: a token may hold only printable ASCII without spaces", name, line)
		}
		d := sha256.Sum256([]byte(tok))
		if prev, ok := seen[d]; ok {
			return nil, fmt.Errorf("%s:%d: duplicate token (first on line %d)", name, line, prev)
		}
		seen[d] = line
		ts.digests = append(ts.digests, d)
		ts.roles = append(ts.roles, g)
		if g.admin {
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

// lookup reports whether token is known and its roles. It compares the
// token's digest with every digest, in constant time, so the time taken
// says nothing about which token (if any) matched.
func (ts *tokenSet) lookup(token string) (ok bool, g grant) {
	d := sha256.Sum256([]byte(token))
	match, adm, ref := 0, 0, 0
	for i := range ts.digests {
		eq := subtle.ConstantTimeCompare(d[:], ts.digests[i][:])
		match |= eq
		adm |= eq & b2i(ts.roles[i].admin)
		ref |= eq & b2i(ts.roles[i].refund)
	}
	return match == 1, grant{admin: adm == 1, refund: ref == 1}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// errBadToken is what a wrong token gets; it says nothing about the token.
var errBadToken = status.Error(codes.Unauthenticated, "unknown bearer token: send one of the server's --auth-token-file, as the header authorization: Bearer TOKEN")

// errNoToken is what a call without a bearer token gets: what to send.
var errNoToken = status.Error(codes.Unauthenticated, "no bearer token: this server needs the header authorization: Bearer TOKEN, with a token of its --auth-token-file")

// check authenticates a call to method from the metadata in ctx and
// returns ctx carrying the call's grant.
func (t *TokenAuth) check(ctx context.Context, method string) (context.Context, error) {
	token, err := grpcauth.AuthFromMD(ctx, "bearer")
	if err != nil {
		return nil, errNoToken
	}
	ok, g := t.files.Current().lookup(token)
	if !ok {
		return nil, errBadToken
	}
	if adminMethods[method] && !g.admin {
		return nil, status.Errorf(codes.PermissionDenied, "%s needs an admin token", method)
	}
	return context.WithValue(ctx, grantKey{}, g), nil
}

// Authorize authenticates a call to fullMethod from another front door
// than gRPC, by its HTTP Authorization header ("" when absent), with the
// gRPC rules and errors. The returned ctx carries the call's grant.
func (t *TokenAuth) Authorize(ctx context.Context, fullMethod, authorization string) (context.Context, error) {
	md := metadata.MD{}
	if authorization != "" {
		md.Set("authorization", authorization)
	}
	return t.check(metadata.NewIncomingContext(ctx, md), fullMethod)
}

// Tap authenticates a call when its headers arrive (the Gate's
// grpc.InTapHandle): ctx holds the incoming metadata, method is
// "/service/method". Open services pass without a token.
func (t *TokenAuth) Tap(ctx context.Context, method string) (context.Context, error) {
	if openServices[serviceOf(method)] {
		return ctx, nil
	}
	return t.check(ctx, method)
}

// serviceOf is the service of a full method name "/service/method".
func serviceOf(fullMethod string) string {
	s := strings.TrimPrefix(fullMethod, "/")
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[:i]
	}
	return s
}

// Reload re-reads the token file now, whether or not it changed (for
// SIGHUP). On error the previous tokens stay in force.
func (t *TokenAuth) Reload() error { return t.files.Reload() }

// Close stops watching the token file; the tokens in force stay. It is
// safe to call more than once.
func (t *TokenAuth) Close() error { return t.files.Close() }
