package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/store"
)

// errInvalid marks a request that fails validation; the message names the
// field. errNotFound marks an unknown policy.
var (
	errInvalid  = errors.New("invalid argument")
	errNotFound = errors.New("not found")
)

// invalidf is a validation error whose message names the field.
func invalidf(field, format string, args ...any) error {
	return &fieldError{field: field, msg: fmt.Sprintf(format, args...), kind: errInvalid}
}

// fieldError is a request error about one field.
type fieldError struct {
	field string
	msg   string
	kind  error
}

func (e *fieldError) Error() string { return e.field + ": " + e.msg }
func (e *fieldError) Unwrap() error { return e.kind }

// within prefixes a field error with its parent, e.g. "checks[2].".
func within(prefix string, err error) error {
	if fe, ok := errors.AsType[*fieldError](err); ok {
		return &fieldError{field: prefix + "." + fe.field, msg: fe.msg, kind: fe.kind}
	}
	return err
}

// fmtIndex is "name[i]", for field paths inside repeated fields.
func fmtIndex(name string, i int) string { return name + "[" + strconv.Itoa(i) + "]" }

// toStatus maps an error to a gRPC status. It is the one place where errors
// become codes: validation -> InvalidArgument, unknown policy -> NotFound,
// store down -> Unavailable, context -> its own code, anything else ->
// Internal, with the cause logged once here (clients see no internals).
func toStatus(ctx context.Context, log *slog.Logger, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, errNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		if ctx.Err() != nil { // the caller's own deadline or cancel
			return status.FromContextError(ctx.Err()).Err()
		}
		return status.Error(codes.Unavailable, "store did not answer in time")
	case errors.Is(err, store.ErrUnavailable):
		return status.Error(codes.Unavailable, "store unavailable")
	}
	if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
		return err
	}
	log.ErrorContext(ctx, "internal error", "err", err)
	return status.Error(codes.Internal, "internal error")
}
