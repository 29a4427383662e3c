package loadgen

import (
	"cmp"
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Run phases, in order.
const (
	phaseWarmup int32 = iota
	// phaseStarting: the MeasureHook runs and workers send nothing new.
	phaseStarting
	phaseMeasure
	phaseStopped
)

// numCodes is the number of gRPC codes (OK through Unauthenticated); other
// codes are counted as Unknown.
const numCodes = int(codes.Unauthenticated) + 1

// worker is one closed-loop sender's counters, written by its goroutine
// only (progress reads done and measured).
type worker struct {
	hist     Histogram
	allowed  uint64
	denied   uint64
	limited  uint64
	errs     [numCodes]uint64
	done     atomic.Uint64 // answered requests, in any phase
	measured atomic.Uint64 // answered requests recorded, after recording
	_        [64]byte      // keep the counters off the next worker's cache line
}

// caller sends one request for key and says whether it was allowed, and
// whether the answer carried a limit (see Result.Limited).
type caller func(ctx context.Context, key int) (allowed, limited bool, err error)

// Run sends requests as Config says until the duration or MaxRequests is
// reached, or ctx ends (then the result so far is returned, Interrupted).
// Metadata in ctx (e.g. an authorization token) is sent with every request.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.Descriptors = cmp.Or(cfg.Descriptors, 1)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.ProgressInterval = cmp.Or(max(cfg.ProgressInterval, 0), 250*time.Millisecond)
	seed := uint64(time.Now().UnixNano())
	newCaller := builder(&cfg)

	// Calls outlive ctx by the grace period, so that a cancelled run stops
	// measuring before its in-flight calls fail.
	callCtx, cancelCalls := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCalls()

	hook := func(begin bool) {
		if cfg.MeasureHook != nil {
			cfg.MeasureHook(begin)
		}
	}
	var phase atomic.Int32
	var cpuStart, cpuEnd time.Duration
	var measureStart, measureEnd time.Time
	var endTimer <-chan time.Time // armed when the measurement begins
	phaseStart := time.Now()
	begin := func() {
		hook(true)
		cpuStart = processCPU()
		measureStart = time.Now()
		phaseStart = measureStart
		if cfg.Duration > 0 {
			endTimer = time.After(cfg.Duration)
		}
	}
	var warmupEnd <-chan time.Time
	if cfg.Warmup > 0 {
		warmupEnd = time.After(cfg.Warmup)
	} else {
		begin() // before any worker sends
		phase.Store(phaseMeasure)
	}
	var budget *atomic.Int64
	if cfg.MaxRequests > 0 {
		budget = new(atomic.Int64)
		budget.Store(int64(min(cfg.MaxRequests, 1<<62)))
	}

	begun := make(chan struct{}) // closed when phaseStarting ends
	workers := make([]worker, cfg.Concurrency)
	var wg sync.WaitGroup
	for i := range workers {
		w := &workers[i]
		call := newCaller(cfg.Conns[i%len(cfg.Conns)])
		pick := keyPicker(cfg, seed, uint64(i))
		wg.Go(func() { w.run(callCtx, call, pick, control{phase: &phase, budget: budget, begun: begun}) })
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()

	res := &Result{Config: cfg}
	res.Config.Progress = nil
	res.Config.MeasureHook = nil
	// answered counts the current phase's answers: while measuring, only
	// those recorded (not warmup calls answered late).
	answered := func(measuring bool) uint64 {
		var n uint64
		for i := range workers {
			if measuring {
				n += workers[i].measured.Load()
			} else {
				n += workers[i].done.Load()
			}
		}
		return n
	}
	running := true
	stop := func() {
		measureEnd = time.Now()
		phase.Store(phaseStopped)
		cpuEnd = processCPU()
		if !measureStart.IsZero() {
			hook(false)
		}
		running = false
	}

	ticker := time.NewTicker(cfg.ProgressInterval)
	defer ticker.Stop()
	for running {
		select {
		case <-warmupEnd:
			phase.Store(phaseStarting)
			begin()
			phase.Store(phaseMeasure)
			close(begun)
		case <-endTimer:
			stop()
		case <-allDone: // MaxRequests reached
			stop()
		case <-ctx.Done():
			stop()
			res.Interrupted = true
		case now := <-ticker.C:
			if cfg.Progress != nil {
				warm := phase.Load() == phaseWarmup
				n := answered(!warm)
				el := now.Sub(phaseStart)
				cfg.Progress(Progress{Warmup: warm, Elapsed: el, Requests: n, Rate: perSecond(n, el)})
			}
		}
	}
	if res.Interrupted {
		cancelCalls()
	}
	grace := time.NewTimer(5 * time.Second) // for the calls in flight, then cancelled
	select {
	case <-allDone:
		grace.Stop()
	case <-grace.C:
		cancelCalls()
		<-allDone
	}

	if !measureStart.IsZero() {
		res.Elapsed = measureEnd.Sub(measureStart)
		res.GeneratorCPU = max(cpuEnd-cpuStart, 0)
	}
	res.Latency = new(Histogram)
	res.Errors = map[codes.Code]uint64{}
	for i := range workers {
		w := &workers[i]
		res.Latency.Merge(&w.hist)
		res.Allowed += w.allowed
		res.Denied += w.denied
		res.Limited += w.limited
		for c, n := range w.errs {
			if n > 0 {
				res.Errors[codes.Code(c)] += n
			}
		}
	}
	return res, nil
}

// control is what every worker follows: the phase, the requests left to
// send while measuring (nil: no MaxRequests), and begun.
type control struct {
	phase  *atomic.Int32
	budget *atomic.Int64
	begun  <-chan struct{}
}

// run is one worker's closed loop: send, wait, record the exchange if it
// happened wholly while measuring, until ctl says stop.
func (w *worker) run(ctx context.Context, call caller, pick func() int, ctl control) {
	phase, budget, begun := ctl.phase, ctl.budget, ctl.begun
	for {
		p := phase.Load()
		if p == phaseStopped {
			return
		}
		if p == phaseStarting {
			<-begun
			continue
		}
		if p == phaseMeasure && budget != nil && budget.Add(-1) < 0 {
			return
		}
		key := pick()
		t := time.Now()
		allowed, limited, err := call(ctx, key)
		d := time.Since(t)
		w.done.Add(1)
		if p != phaseMeasure || phase.Load() != phaseMeasure {
			continue
		}
		w.hist.Record(d)
		switch {
		case err != nil:
			c := int(status.Code(err))
			if c >= numCodes {
				c = int(codes.Unknown)
			}
			w.errs[c]++
		case allowed:
			w.allowed++
		default:
			w.denied++
		}
		if err == nil && limited {
			w.limited++
		}
		w.measured.Add(1)
	}
}

// keyPicker returns a worker's key chooser, seeded per worker.
func keyPicker(cfg Config, seed, worker uint64) func() int {
	r := rand.New(rand.NewPCG(seed, worker))
	n := max(cfg.Keys, 1)
	if cfg.Zipf > 1 && n > 1 {
		z := rand.NewZipf(r, cfg.Zipf, 1, uint64(n-1))
		return func() int { return int(z.Uint64()) }
	}
	return func() int { return r.IntN(n) }
}
