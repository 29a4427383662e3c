package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// httpStatus is the HTTP status of a gRPC code: the mapping grpc-gateway
// and Google's APIs use (google.rpc.Code's documentation).
func httpStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.Canceled:
		return 499 // client closed request
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError // Unknown, Internal, DataLoss
}

// apiError is the body of an error answer.
type apiError struct {
	// Code is the gRPC code's name, e.g. "INVALID_ARGUMENT".
	Code string `json:"code"`
	// Message is the gRPC status message: for a bad request, it names
	// the field.
	Message string `json:"message"`
}

// errorBody is the JSON of an error answer.
func errorBody(c codes.Code, msg string) []byte {
	b, err := json.Marshal(apiError{Code: codeName(c), Message: msg})
	if err != nil { // strings always marshal
		return []byte(`{"code":"INTERNAL","message":"internal error"}` + "\n")
	}
	return append(b, '\n')
}

// codeNames are google.rpc.Code's names, e.g. "INVALID_ARGUMENT".
var codeNames = [...]string{
	codes.OK:                 "OK",
	codes.Canceled:           "CANCELLED",
	codes.Unknown:            "UNKNOWN",
	codes.InvalidArgument:    "INVALID_ARGUMENT",
	codes.DeadlineExceeded:   "DEADLINE_EXCEEDED",
	codes.NotFound:           "NOT_FOUND",
	codes.AlreadyExists:      "ALREADY_EXISTS",
	codes.PermissionDenied:   "PERMISSION_DENIED",
	codes.ResourceExhausted:  "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION",
	codes.Aborted:            "ABORTED",
	codes.OutOfRange:         "OUT_OF_RANGE",
	codes.Unimplemented:      "UNIMPLEMENTED",
	codes.Internal:           "INTERNAL",
	codes.Unavailable:        "UNAVAILABLE",
	codes.DataLoss:           "DATA_LOSS",
	codes.Unauthenticated:    "UNAUTHENTICATED",
}

// codeName is c's name as google.rpc.Code spells it; UNKNOWN for a code
// out of its range.
func codeName(c codes.Code) string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "UNKNOWN"
}

// decodeMessage explains a body that is not the JSON of req: protojson's
// error (which names an unknown field, or where the syntax broke) without
// its "proto:" prefix, after the message's name.
func decodeMessage(req proto.Message, err error) string {
	msg := strings.TrimPrefix(err.Error(), "proto:")
	msg = strings.TrimLeft(msg, " \u00a0") // protojson varies this space on purpose
	return "invalid JSON for " + string(req.ProtoReflect().Descriptor().FullName()) + ": " + msg
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// quoteOrNone is s quoted, or "none" when empty.
func quoteOrNone(s string) string {
	if s == "" {
		return "none"
	}
	return strconv.Quote(s)
}
