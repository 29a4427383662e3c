package loadgen

import (
	"time"

	"google.golang.org/grpc/codes"
)

// Progress is a snapshot of a run in progress.
type Progress struct {
	// Warmup is true while warming up (nothing is measured yet).
	Warmup bool
	// Elapsed is the time since the current phase began.
	Elapsed time.Duration
	// Requests is the number of requests answered in the current phase
	// (while measuring, only those the Result will count).
	Requests uint64
	// Rate is Requests / Elapsed, per second.
	Rate float64
}

// Result is what a run measured: requests both sent and answered during
// the measurement.
type Result struct {
	// Config is the run's configuration, defaults filled in, Progress nil.
	Config Config
	// Elapsed is the measured time.
	Elapsed time.Duration
	// Allowed and Denied count the decisions (the package doc says which
	// answer is allowed for each API).
	Allowed, Denied uint64
	// Limited counts the decisions whose answer carried a limit: every
	// check, the rls answers with a current_limit (none means the server
	// has no rule for the bench descriptors), no health answer.
	Limited uint64
	// Errors counts the failed RPCs by gRPC status code.
	Errors map[codes.Code]uint64
	// Latency holds the latency of every measured request, errors included.
	Latency *Histogram
	// Interrupted is set when the run's context ended before the run did.
	Interrupted bool
	// GeneratorCPU is the CPU time the whole process used while
	// measuring; 0 where not Unix.
	GeneratorCPU time.Duration
}

// GeneratorCPUPerRequest is GeneratorCPU divided by Requests.
func (r *Result) GeneratorCPUPerRequest() time.Duration {
	if n := r.Requests(); n > 0 {
		return r.GeneratorCPU / time.Duration(n)
	}
	return 0
}

// ErrorCount is the number of failed requests.
func (r *Result) ErrorCount() uint64 {
	var n uint64
	for _, c := range r.Errors {
		n += c
	}
	return n
}

// Requests is the number of measured requests: Allowed + Denied + ErrorCount.
func (r *Result) Requests() uint64 { return r.Allowed + r.Denied + r.ErrorCount() }

// RequestRate is Requests per second of Elapsed.
func (r *Result) RequestRate() float64 { return perSecond(r.Requests(), r.Elapsed) }

// DecisionRate is Allowed + Denied per second of Elapsed.
func (r *Result) DecisionRate() float64 { return perSecond(r.Allowed+r.Denied, r.Elapsed) }

func perSecond(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
