package auth

import (
	"context"

	grpcauth "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// AuthorizeAdmin authenticates a request to an admin-only HTTP endpoint
// (/debug/config) from its Authorization header: the token must have the
// admin role. Errors carry gRPC codes: Unauthenticated, PermissionDenied.
func (t *TokenAuth) AuthorizeAdmin(ctx context.Context, authorization string) error {
	md := metadata.MD{}
	if authorization != "" {
		md.Set("authorization", authorization)
	}
	token, err := grpcauth.AuthFromMD(metadata.NewIncomingContext(ctx, md), "bearer")
	if err != nil {
		return err // codes.Unauthenticated
	}
	ok, g := t.files.Current().lookup(token)
	switch {
	case !ok:
		return errBadToken
	case !g.admin:
		return status.Error(codes.PermissionDenied, "this endpoint needs an admin token")
	}
	return nil
}
