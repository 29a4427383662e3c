package httpapi

import (
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
)

// TestCodes: every gRPC code's name as google.rpc.Code spells it, and its
// HTTP status.
func TestCodes(t *testing.T) {
	for _, tc := range []struct {
		code   codes.Code
		name   string
		status int
	}{
		{codes.OK, "OK", 200},
		{codes.Canceled, "CANCELLED", 499},
		{codes.Unknown, "UNKNOWN", 500},
		{codes.InvalidArgument, "INVALID_ARGUMENT", 400},
		{codes.DeadlineExceeded, "DEADLINE_EXCEEDED", 504},
		{codes.NotFound, "NOT_FOUND", 404},
		{codes.AlreadyExists, "ALREADY_EXISTS", 409},
		{codes.PermissionDenied, "PERMISSION_DENIED", 403},
		{codes.ResourceExhausted, "RESOURCE_EXHAUSTED", 429},
		{codes.FailedPrecondition, "FAILED_PRECONDITION", 400},
		{codes.Aborted, "ABORTED", 409},
		{codes.OutOfRange, "OUT_OF_RANGE", 400},
		{codes.Unimplemented, "UNIMPLEMENTED", 501},
		{codes.Internal, "INTERNAL", 500},
		{codes.Unavailable, "UNAVAILABLE", 503},
		{codes.DataLoss, "DATA_LOSS", 500},
		{codes.Unauthenticated, "UNAUTHENTICATED", 401},
		{codes.Code(17), "UNKNOWN", 500}, // out of google.rpc.Code's range
		{codes.Code(1 << 31), "UNKNOWN", 500},
	} {
		if got := codeName(tc.code); got != tc.name {
			t.Errorf("codeName(%v) = %q, want %q", tc.code, got, tc.name)
		}
		if got := runtime.HTTPStatusFromCode(tc.code); got != tc.status {
			t.Errorf("HTTPStatusFromCode(%v) = %d, want %d", tc.code, got, tc.status)
		}
	}
}
