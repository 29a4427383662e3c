package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// httpStatus is the HTTP status of a gRPC code, as grpc-gateway maps it.
func httpStatus(c codes.Code) int { return codeOf(c).status }

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

// codeInfo is what an HTTP answer says of a gRPC code.
type codeInfo struct {
	name   string // google.rpc.Code's, e.g. "INVALID_ARGUMENT"
	status int    // the HTTP status
}

// codeTable holds each gRPC code's name and HTTP status.
var codeTable = [...]codeInfo{
	codes.OK:                 {"OK", http.StatusOK},
	codes.Canceled:           {"CANCELLED", 499}, // client closed request
	codes.Unknown:            {"UNKNOWN", http.StatusInternalServerError},
	codes.InvalidArgument:    {"INVALID_ARGUMENT", http.StatusBadRequest},
	codes.DeadlineExceeded:   {"DEADLINE_EXCEEDED", http.StatusGatewayTimeout},
	codes.NotFound:           {"NOT_FOUND", http.StatusNotFound},
	codes.AlreadyExists:      {"ALREADY_EXISTS", http.StatusConflict},
	codes.PermissionDenied:   {"PERMISSION_DENIED", http.StatusForbidden},
	codes.ResourceExhausted:  {"RESOURCE_EXHAUSTED", http.StatusTooManyRequests},
	codes.FailedPrecondition: {"FAILED_PRECONDITION", http.StatusBadRequest},
	codes.Aborted:            {"ABORTED", http.StatusConflict},
	codes.OutOfRange:         {"OUT_OF_RANGE", http.StatusBadRequest},
	codes.Unimplemented:      {"UNIMPLEMENTED", http.StatusNotImplemented},
	codes.Internal:           {"INTERNAL", http.StatusInternalServerError},
	codes.Unavailable:        {"UNAVAILABLE", http.StatusServiceUnavailable},
	codes.DataLoss:           {"DATA_LOSS", http.StatusInternalServerError},
	codes.Unauthenticated:    {"UNAUTHENTICATED", http.StatusUnauthorized},
}

// codeOf is c's entry of codeTable; UNKNOWN for a code out of its range.
func codeOf(c codes.Code) codeInfo {
	if int(c) < len(codeTable) {
		return codeTable[c]
	}
	return codeTable[codes.Unknown]
}

// codeName is c's name as google.rpc.Code spells it.
func codeName(c codes.Code) string { return codeOf(c).name }

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
