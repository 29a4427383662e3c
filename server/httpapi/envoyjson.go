package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
)

// PathEnvoyJSON serves Envoy's rate-limit API as JSON, as
// envoyproxy/ratelimit's /json does: a RateLimitRequest in, its
// RateLimitResponse out, 200 when OK and 429 when OVER_LIMIT.
const PathEnvoyJSON = "/json"

// EnvoyService decides Envoy's rate-limit requests; *server.Envoy is one.
type EnvoyService interface {
	ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)
}

// envoyJSON serves POST /json with svc, with the other routes' checks; the
// answer is written as protojson's defaults write it (camelCase, unset
// fields left out).
func envoyJSON(h *Handler, svc EnvoyService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rep := reply{h: h, w: w, route: "json", start: start}
		deadline := start.Add(h.timeout)
		_ = http.NewResponseController(w).SetReadDeadline(deadline)
		ctx, cancel := context.WithDeadline(r.Context(), deadline)
		defer cancel()

		ctx, body, _, ok := h.open(ctx, r, rep, rlsv3.RateLimitService_ShouldRateLimit_FullMethodName)
		if !ok {
			return
		}
		var req rlsv3.RateLimitRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			rep.fail(http.StatusBadRequest, codes.InvalidArgument, decodeMessage(&req, err))
			return
		}
		resp, err := svc.ShouldRateLimit(ctx, &req)
		if err != nil {
			rep.status(err)
			return
		}
		out, err := protojson.Marshal(resp)
		if err != nil {
			h.log.ErrorContext(ctx, "http api: encoding an answer", "route", "json", "err", err)
			rep.fail(http.StatusInternalServerError, codes.Internal, "internal error")
			return
		}
		var buf bytes.Buffer
		if json.Compact(&buf, out) == nil {
			out = buf.Bytes()
		}
		rep.send(envoyStatus(resp.GetOverallCode()), out)
	})
}

// envoyStatus is the HTTP status of an overall code: 429 over the limit,
// 200 OK, 500 for an answer with no code.
func envoyStatus(c rlsv3.RateLimitResponse_Code) int {
	switch c {
	case rlsv3.RateLimitResponse_OVER_LIMIT:
		return http.StatusTooManyRequests
	case rlsv3.RateLimitResponse_OK:
		return http.StatusOK
	}
	return http.StatusInternalServerError
}
