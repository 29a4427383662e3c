package httpapi

import (
	"net/http"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate/algorithms"
	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/ratelimitheader"
)

// InlineName is the policy name the headers give an inline limit, as the
// metrics' rule label does.
const InlineName = "inline"

// decision is the part of a CheckResponse or PeekResponse the headers
// describe.
type decision interface {
	GetAllowed() bool
	GetDegraded() bool
	GetRemaining() int64
	GetRetryAfter() *durationpb.Duration
	GetResetAfter() *durationpb.Duration
	GetWarning() bool
	GetWarnAt() int64
	GetLimit() int64
}

// stateOf is what the headers say of the decision r.
func stateOf(r decision) ratelimitheader.State {
	return ratelimitheader.State{
		Remaining:  r.GetRemaining(),
		ResetAfter: r.GetResetAfter().AsDuration(),
		Denied:     !r.GetAllowed(),
		RetryAfter: r.GetRetryAfter().AsDuration(),
		Warning:    r.GetWarning(),
	}
}

// limitFields are the request fields naming a limit.
type limitFields interface {
	GetAlgorithm() floodgatev1.Algorithm
	GetLimit() *floodgatev1.Limit
	GetPolicy() string
}

// decisionHeaders sets the rate-limit headers of the decision resp.
func decisionHeaders[Req limitFields, Resp decision](h *Handler, hd http.Header, req Req, resp Resp) {
	writeHeaders(hd, h.headerLimit(req, resp.GetLimit()), resp, stateOf(resp))
}

// batchHeaders describe the batch's most restrictive check, as the Envoy
// API's headers describe a request's most restrictive descriptor: a
// denied one first (the longest wait), else the one with the least left.
func batchHeaders(h *Handler, hd http.Header, req *floodgatev1.CheckBatchRequest, resp *floodgatev1.CheckBatchResponse) {
	results, checks := resp.GetResults(), req.GetChecks()
	if len(results) == 0 || len(results) != len(checks) {
		return
	}
	best := 0
	for i := 1; i < len(results); i++ {
		if ratelimitheader.MoreRestrictive(stateOf(results[i]), stateOf(results[best])) {
			best = i
		}
	}
	st := stateOf(results[best])
	st.Warning = false // every warning is listed below, not only the headline's
	writeHeaders(hd, h.headerLimit(checks[best], results[best].GetLimit()), results[best], st)
	var members []string
	for i, r := range results {
		if r.GetWarning() {
			members = append(members, ratelimitheader.WarningMember(policyName(checks[i]), r.GetWarnAt()))
		}
	}
	if len(members) > 0 && resp.GetAllowed() {
		hd.Set(ratelimitheader.WarningName, strings.Join(members, ", "))
	}
}

// policyName is the name the headers give the limit of req: its policy's,
// or InlineName.
func policyName(req limitFields) string {
	if name := req.GetPolicy(); name != "" {
		return name
	}
	return InlineName
}

// headerLimit is the quota the headers of a decision under req describe:
// a policy's from the config (or limit, the answer's, when a reload
// removed it), an inline limit's from the request.
func (h *Handler) headerLimit(req limitFields, limit int64) ratelimitheader.Limit {
	if name := req.GetPolicy(); name != "" {
		if h.cfg != nil {
			if p, ok := h.cfg.Current().Policy(name); ok {
				return ratelimitheader.Of(name, p.Rate)
			}
		}
		return ratelimitheader.Limit{Name: name, Quota: limit}
	}
	l := req.GetLimit()
	return ratelimitheader.Of(InlineName, algorithms.Limit{Algorithm: algorithms.Algorithm(req.GetAlgorithm()), Requests: l.GetRequests(), Period: l.GetPeriod().AsDuration(), Burst: l.GetBurst()})
}

// writeHeaders sets the rate-limit headers of the decision r, whose
// state they say is s.
func writeHeaders(hd http.Header, l ratelimitheader.Limit, r decision, s ratelimitheader.State) {
	l.WarnAt = r.GetWarnAt()
	ratelimitheader.SetHTTP(hd, l, s, r.GetDegraded())
}
