package httpapi

import (
	"encoding/json"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

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
	b, _ := json.Marshal(apiError{Code: codeName(c), Message: msg}) // two strings always marshal
	return append(b, '\n')
}

// codeName is c's name as google.rpc.Code spells it, e.g.
// "INVALID_ARGUMENT"; UNKNOWN for a code it does not name.
func codeName(c codes.Code) string {
	if name, ok := code.Code_name[int32(c)]; ok {
		return name
	}
	return code.Code_UNKNOWN.String()
}

// decodeMessage explains a body that is not the JSON of req: protojson's
// error (which names an unknown field, or where the syntax broke) without
// its "proto:" prefix, after the message's name.
func decodeMessage(req proto.Message, err error) string {
	msg := strings.TrimPrefix(err.Error(), "proto:")
	msg = strings.TrimLeft(msg, " \u00a0") // protojson varies this space on purpose
	return "invalid JSON for " + string(req.ProtoReflect().Descriptor().FullName()) + ": " + msg
}

// quoteOrNone is s quoted, or "none" when empty.
func quoteOrNone(s string) string {
	if s == "" {
		return "none"
	}
	return strconv.Quote(s)
}
