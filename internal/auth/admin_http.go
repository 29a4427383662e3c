package auth

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// AuthorizeAdmin authenticates a request to an admin-only HTTP endpoint
// (/debug/config) from its Authorization header: the token must have the
// admin role. Errors carry gRPC codes: Unauthenticated, PermissionDenied.
func (t *TokenAuth) AuthorizeAdmin(ctx context.Context, authorization string) error {
	ctx, err := t.Authorize(ctx, "", authorization)
	if err != nil {
		return err
	}
	if g, _ := grantFrom(ctx); !g.admin {
		return status.Error(codes.PermissionDenied, "this endpoint needs an admin token")
	}
	return nil
}
