// Package httpapi serves floodgate.v1.RateLimiter over HTTP/JSON, for
// callers that have fetch but no gRPC (edge workers, curl, serverless
// functions), and Envoy's rate-limit API at /json. docs/httpapi.md is the
// reference: routes, bodies, errors, limits and the browser rules.
//
// Bodies are the protobuf JSON mapping of the same messages, with the
// spellings people type besides (lenient.go); answers emit every field.
// The handlers call the very RateLimiter the gRPC server serves, in
// process. Being over the limit is a decision, not an error: 200 with
// "allowed": false (or 429 by Settings.DenyStatus or ?deny_status=429)
// and the rate-limit headers.
package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"strconv"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/giveback"
	"github.com/floodgate/floodgate/server"
)

// Defaults for Settings' zero values.
const (
	// DefaultMaxBodyBytes bounds a request body, like the gRPC side's
	// server.DefaultMaxRecvMsgBytes bounds a message.
	DefaultMaxBodyBytes = server.DefaultMaxRecvMsgBytes
	// DefaultTimeout bounds a request from its headers to its answer, body
	// included, like server.DefaultUnaryTimeout bounds a unary call.
	DefaultTimeout = server.DefaultUnaryTimeout
)

// The routes, by their path.
const (
	PathCheck      = "/v1/check"
	PathCheckBatch = "/v1/check:batch"
	PathPeek       = "/v1/peek"
	PathReset      = "/v1/reset"
	// PathSettle settles usage known afterwards (floodgate.v1.RateLimiter/Settle).
	PathSettle = "/v1/settle"
	// PathEnvoyJSON serves Envoy's rate-limit API as JSON, as
	// envoyproxy/ratelimit's /json does: a RateLimitRequest in, its
	// RateLimitResponse out, 200 when OK and 429 when OVER_LIMIT.
	PathEnvoyJSON = "/json"
)

// Settings are the API's optional knobs. The zero value is usable: no
// auth, no CORS, default limits, no metrics.
type Settings struct {
	// Auth checks bearer tokens; nil lets every request in (as the gRPC
	// server without --auth-token-file).
	Auth *auth.TokenAuth
	// Rules gives the named policies, for the quota the headers of a
	// policy's decision describe; nil means no config file.
	Rules server.RuleSource
	// MaxBodyBytes bounds a request body. 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Timeout bounds a request, reading its body included. 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// AllowedOrigins turn CORS on for these origins ("https://app.example"
	// as a browser sends it in Origin; "*" allows any). Empty: CORS off,
	// and browsers on other origins cannot call the API.
	AllowedOrigins []string
	// Metrics registers floodgate_http_requests_total and
	// floodgate_http_request_duration_seconds; nil records nothing.
	Metrics prometheus.Registerer
	// Logger receives errors writing answers. nil means slog.Default().
	Logger *slog.Logger
	// Envoy, when set, serves POST /json: Envoy's rate-limit API as JSON
	// (PathEnvoyJSON).
	Envoy *server.Envoy
	// DenyStatus is the HTTP status of a denied check or batch: 200 (the
	// answer's "allowed": false says it) or 429 (Too Many Requests). A
	// request chooses its own with ?deny_status=. 0 means 200.
	DenyStatus int
	// ResetRefused, when set, is the refusal of everything that gives
	// budget back on this port (giveback.WithRefusal).
	ResetRefused string
}

// Handler serves the API. Build one with New.
type Handler struct {
	auth    *auth.TokenAuth
	cfg     server.RuleSource
	maxBody int64
	timeout time.Duration
	cors    *cors
	metrics *metrics
	log     *slog.Logger
	mux     *http.ServeMux
	noReset string // Settings.ResetRefused
	deny    int    // Settings.DenyStatus
}

// New serves rl over HTTP/JSON. rl should be the server.RateLimiter the
// gRPC server serves, built with CheckSettings.API = observability.APIHTTP.
func New(rl floodgatev1.RateLimiterServer, s Settings) *Handler {
	h := &Handler{
		auth:    s.Auth,
		cfg:     s.Rules,
		maxBody: cmp.Or(max(s.MaxBodyBytes, 0), DefaultMaxBodyBytes),
		timeout: cmp.Or(max(s.Timeout, 0), DefaultTimeout),
		cors:    newCORS(s.AllowedOrigins),
		metrics: newMetrics(s.Metrics),
		log:     cmp.Or(s.Logger, slog.Default()),
		mux:     http.NewServeMux(),
		noReset: s.ResetRefused,
	}
	if h.deny = s.DenyStatus; h.deny != http.StatusTooManyRequests {
		h.deny = http.StatusOK
	}
	h.mux.Handle("POST "+PathCheck, route(h, rpc{name: "check", method: floodgatev1.RateLimiter_Check_FullMethodName}, rl.Check, decisionHeaders))
	h.mux.Handle("POST "+PathCheckBatch, route(h, rpc{name: "check_batch", method: floodgatev1.RateLimiter_CheckBatch_FullMethodName}, rl.CheckBatch, batchHeaders))
	h.mux.Handle("POST "+PathPeek, route(h, rpc{name: "peek", method: floodgatev1.RateLimiter_Peek_FullMethodName}, rl.Peek, decisionHeaders))
	h.mux.Handle("POST "+PathReset, route(h, rpc{name: "reset", method: floodgatev1.RateLimiter_Reset_FullMethodName}, rl.Reset, nil))
	h.mux.Handle("POST "+PathSettle, route(h, rpc{name: "settle", method: floodgatev1.RateLimiter_Settle_FullMethodName}, rl.Settle, nil))
	if s.Envoy != nil {
		h.mux.Handle("POST "+PathEnvoyJSON, route(h, rpc{name: "json", method: rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, envoy: true}, s.Envoy.ShouldRateLimit, nil))
	}
	h.mux.HandleFunc("/", h.notFound)
	return h
}

// ServeHTTP serves the routes under /v1/; mount the Handler there.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.cors.handle(w, r) {
		return // a preflight, answered
	}
	h.mux.ServeHTTP(w, r)
}

// notFound answers paths that are no route (404) and routes asked with
// another method than POST (405), as JSON errors.
func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	rep := reply{h: h, w: w, route: "other", start: time.Now()}
	switch r.URL.Path {
	case PathCheck, PathCheckBatch, PathPeek, PathReset, PathSettle, PathEnvoyJSON:
		w.Header().Set("Allow", http.MethodPost)
		rep.fail(http.StatusMethodNotAllowed, codes.Unimplemented, r.Method+" "+r.URL.Path+": use POST")
		return
	}
	rep.fail(http.StatusNotFound, codes.NotFound, "no such route "+r.URL.Path+" (POST "+PathCheck+", "+PathCheckBatch+", "+PathPeek+", "+PathReset+" or "+PathSettle+")")
}

// message is a request message type: a pointer to a generated struct.
type message[T any] interface {
	*T
	proto.Message
}

// rpc names the RPC a route serves: name labels it in metrics and logs,
// method is its gRPC full method name, the one authorization checks.
// envoy marks Envoy's API as JSON, served as envoyproxy/ratelimit's /json
// is: the body as sent (no lenient spellings), the answer as protojson
// writes it by default and with no newline, 429 when OVER_LIMIT.
type rpc struct {
	name, method string
	envoy        bool
}

// route serves one RPC: authenticate, read, decode, call, answer;
// headers, when not nil, writes the rate-limit headers of an answer.
func route[T any, Req message[T], Resp proto.Message](h *Handler, m rpc, call func(context.Context, Req) (Resp, error), headers func(*Handler, http.Header, Req, Resp)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rep := reply{h: h, w: w, route: m.name, start: start}
		deadline := start.Add(h.timeout)
		// The time bound covers reading the body, like the gRPC side's
		// unary timeout covers waiting for the message.
		_ = http.NewResponseController(w).SetReadDeadline(deadline)
		ctx, cancel := context.WithDeadline(r.Context(), deadline)
		defer cancel()

		ctx, body, denyStatus, ok := h.open(ctx, r, rep, m.method)
		if !ok {
			return
		}
		req := Req(new(T))
		if !m.envoy {
			body = lenient(body, req.ProtoReflect().Descriptor())
		}
		if err := unmarshal.Unmarshal(body, req); err != nil {
			rep.fail(http.StatusBadRequest, codes.InvalidArgument, decodeMessage(req, err))
			return
		}
		resp, err := call(ctx, req)
		if err != nil {
			rep.status(err)
			return
		}
		opts := marshal
		if m.envoy {
			opts = protojson.MarshalOptions{}
		}
		out, err := opts.Marshal(resp)
		if err != nil {
			h.log.ErrorContext(ctx, "http api: encoding an answer", "route", m.name, "err", err)
			rep.fail(http.StatusInternalServerError, codes.Internal, "internal error")
			return
		}
		// protojson varies its spacing on purpose; answers are compact.
		var buf bytes.Buffer
		buf.Grow(len(out) + 1)
		if json.Compact(&buf, out) == nil {
			out = buf.Bytes()
		}
		if headers != nil {
			headers(h, w.Header(), req, resp)
		}
		if !m.envoy {
			out = append(out, '\n')
		}
		rep.send(httpCode(resp, denyStatus), out)
	})
}

// open checks r before its body is read (its Content-Type, its
// ?deny_status=, its token for method) and reads the body, within ctx's
// deadline and the body limit. When ok is false it has answered.
func (h *Handler) open(ctx context.Context, r *http.Request, rep reply, method string) (_ context.Context, body []byte, denyStatus int, ok bool) {
	if !h.typeAccepted(r) {
		rep.fail(http.StatusUnsupportedMediaType, codes.InvalidArgument, "Content-Type must be application/json from a web page (Origin "+quoteOrNone(r.Header.Get("Origin"))+"), got "+quoteOrNone(r.Header.Get("Content-Type")))
		return ctx, nil, 0, false
	}
	denyStatus, err := h.denyStatus(r)
	if err != nil {
		rep.fail(http.StatusBadRequest, codes.InvalidArgument, err.Error())
		return ctx, nil, 0, false
	}
	if h.auth != nil {
		if ctx, err = h.auth.Authorize(ctx, method, r.Header.Get("Authorization")); err != nil {
			rep.status(err)
			return ctx, nil, 0, false
		}
	}
	ctx = giveback.WithRefusal(ctx, h.noReset)
	body, err = io.ReadAll(http.MaxBytesReader(rep.w, r.Body, h.maxBody))
	if err != nil {
		if tooBig, ok := errors.AsType[*http.MaxBytesError](err); ok {
			rep.fail(http.StatusRequestEntityTooLarge, codes.ResourceExhausted, "request body exceeds the limit of "+strconv.FormatInt(tooBig.Limit, 10)+" bytes")
			return ctx, nil, 0, false
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			rep.fail(http.StatusRequestTimeout, codes.DeadlineExceeded, "the request body did not arrive within "+h.timeout.String())
			return ctx, nil, 0, false
		}
		rep.fail(http.StatusBadRequest, codes.InvalidArgument, "reading the request body: "+err.Error())
		return ctx, nil, 0, false
	}
	return ctx, body, denyStatus, true
}

// unmarshal is strict: an unknown field is an error naming it.
var unmarshal = protojson.UnmarshalOptions{DiscardUnknown: false}

// marshal writes every field, defaults included, like `grpcurl
// -emit-defaults`: a denial says "allowed": false.
var marshal = protojson.MarshalOptions{EmitUnpopulated: true}

// httpCode is the HTTP status of the answer resp: denyStatus for a
// check's or a batch's denial, 429 for Envoy's OVER_LIMIT (500 for an
// Envoy answer with no code), else 200. A peek only tells what a check
// would answer, and is always a 200.
func httpCode(resp proto.Message, denyStatus int) int {
	switch r := resp.(type) {
	case *floodgatev1.CheckResponse:
		if !r.GetAllowed() {
			return denyStatus
		}
	case *floodgatev1.CheckBatchResponse:
		if !r.GetAllowed() {
			return denyStatus
		}
	case *rlsv3.RateLimitResponse:
		switch r.GetOverallCode() {
		case rlsv3.RateLimitResponse_OVER_LIMIT:
			return http.StatusTooManyRequests
		case rlsv3.RateLimitResponse_OK:
		default:
			return http.StatusInternalServerError
		}
	}
	return http.StatusOK
}

// typeAccepted reports whether r's Content-Type may be decoded as JSON:
// always application/json, which needs a CORS preflight; anything when r
// has no Origin or an allowed one. A page may send text/plain to another
// origin without asking.
func (h *Handler) typeAccepted(r *http.Request) bool {
	if isJSON(r.Header.Get("Content-Type")) {
		return true
	}
	origin := r.Header.Get("Origin")
	return origin == "" || h.cors.allows(origin)
}

// DenyStatusParam is the query parameter that chooses the HTTP status of a
// denied check for one request: ?deny_status=429, or 200 (the default
// unless Settings.DenyStatus says otherwise).
const DenyStatusParam = "deny_status"

// denyStatus is the HTTP status a denied check of r answers with.
func (h *Handler) denyStatus(r *http.Request) (int, error) {
	v := r.URL.Query().Get(DenyStatusParam)
	switch v {
	case "":
		return h.deny, nil
	case "200":
		return http.StatusOK, nil
	case "429":
		return http.StatusTooManyRequests, nil
	}
	return 0, errors.New(DenyStatusParam + ": want 200 or 429, got " + quoteOrNone(v))
}

// isJSON reports whether ct is application/json (parameters allowed).
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// reply answers one request of route, which started at start.
type reply struct {
	h     *Handler
	w     http.ResponseWriter
	route string
	start time.Time
}

// status answers a gRPC status error.
func (a reply) status(err error) {
	st := status.Convert(err)
	if st.Code() == codes.Unauthenticated {
		a.w.Header().Set("WWW-Authenticate", `Bearer realm="floodgate"`)
	}
	a.fail(runtime.HTTPStatusFromCode(st.Code()), st.Code(), st.Message())
}

// fail answers {"code": ..., "message": ...} with httpCode.
func (a reply) fail(httpCode int, code codes.Code, msg string) {
	a.send(httpCode, errorBody(code, msg))
}

// send sends an answer and records it in the metrics.
func (a reply) send(httpCode int, body []byte) {
	hd := a.w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	a.w.WriteHeader(httpCode)
	_, _ = a.w.Write(body)
	a.h.metrics.observe(a.route, httpCode, time.Since(a.start))
}
