package server

import (
	"cmp"
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/floodgate/floodgate/algorithms"
	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/giveback"
	"github.com/floodgate/floodgate/internal/keys"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/zones"
	"github.com/floodgate/floodgate/store"
)

// check is a validated check: what to ask the store, and how to answer.
type check struct {
	req         store.Request
	failureMode rules.FailureMode
	shadow      bool
	rule        string // the metrics label: the policy's name, or "inline"
	warnAt      int64  // the warning threshold in units; 0 for none (softlimit.go)
}

// checkFields are the fields CheckRequest and PeekRequest share.
type checkFields interface {
	limitSource
	GetCost() int64
}

// limitSource are the fields naming a key and its limit, which Reset
// and Settle share with the checks.
type limitSource interface {
	GetKey() string
	GetAlgorithm() floodgatev1.Algorithm
	GetLimit() *floodgatev1.Limit
	GetPolicy() string
}

// costOne resolves a Reset's or a Settle's key and limit as a check of
// cost 1, which any limit holds.
type costOne struct{ limitSource }

func (costOne) GetCost() int64 { return 1 }

// resolve validates a check and finds its limit.
func (r *RateLimiter) resolve(req checkFields) (check, error) {
	if err := r.validateKey(req.GetKey()); err != nil {
		return check{}, err
	}
	cost := cmp.Or(req.GetCost(), 1)
	alg := algorithms.Algorithm(req.GetAlgorithm())
	if alg != algorithms.Unspecified && !alg.Valid() {
		return check{}, invalidf("algorithm", "unknown value %d", int32(alg))
	}

	var c check
	switch {
	case req.GetPolicy() != "":
		p, err := r.policy(req.GetPolicy())
		if err != nil {
			return check{}, err
		}
		if alg != algorithms.Unspecified && alg != p.Rate.Algorithm {
			return check{}, invalidf("algorithm", "%v does not match policy %q, which uses %v; leave algorithm unset", alg, p.Name, p.Rate.Algorithm)
		}
		c.req.Limit = p.Rate
		c.req.Scope = keys.PolicyScope(p.Name)
		c.shadow = p.ShadowMode
		c.rule = p.Name
		c.warnAt = p.Warn.At(p.Rate.Capacity())
		c.failureMode = r.modeOf(p.FailureMode)
	case req.GetLimit() != nil:
		if alg == algorithms.Unspecified {
			return check{}, invalidf("algorithm", "required with an inline limit (%s)", algorithms.Names(algorithms.All(), "or", wireName))
		}
		l, err := inlineLimit(alg, req.GetLimit(), &r.zones)
		if err != nil {
			return check{}, err
		}
		if c.warnAt, err = inlineWarnAt(req.GetLimit(), l); err != nil {
			return check{}, err
		}
		c.req.Limit = l
		c.req.Scope = keys.InlineScope(l)
		c.rule = "inline"
		c.failureMode = r.failureMode
	default:
		return check{}, invalidf("limit", "one of limit or policy is required")
	}
	facts := c.req.Limit.Algorithm.Facts()
	if cost < 0 && !facts.GiveBack {
		givers := algorithms.Names(algorithms.Which(func(f algorithms.Facts) bool { return f.GiveBack }), "or", algorithms.Algorithm.String)
		return check{}, invalidf("cost", "must not be negative, got %d (only %s can give units back)", cost, givers)
	}
	if capacity := c.req.Limit.Capacity(); cost > capacity {
		what := facts.Burst
		if what == "" {
			what = "requests"
		}
		return check{}, invalidf("cost", "%d exceeds the limit's capacity of %d (%s), so it could never be allowed", cost, capacity, what)
	}
	c.req.Key = keys.Check(req.GetKey())
	c.req.Cost = cost
	return c, nil
}

// checkRefund refuses a check that gives units back (cost < 0, as the
// Go client's Wait does when it cannot use its slot)
// with codes.PermissionDenied unless the give-back rule allows it
// (internal/giveback), as it does Envoy's is_negative_hits and Reset.
func (d *decider) checkRefund(ctx context.Context, field string, c check) error {
	if c.req.Cost >= 0 {
		return nil
	}
	return d.giveBackRefused(ctx, giveback.Refund, field)
}

func (r *RateLimiter) validateKey(key string) error {
	switch {
	case key == "":
		return invalidf("key", "must not be empty")
	case len(key) > r.maxKey:
		return invalidf("key", "%d bytes exceed the limit of %d", len(key), r.maxKey)
	}
	return nil
}

func (r *RateLimiter) policy(name string) (rules.Policy, error) {
	if p, ok := currentRules(r.cfg).Policy(name); ok {
		return p, nil
	}
	return rules.Policy{}, &fieldError{field: "policy", msg: "unknown policy " + strconv.Quote(name), kind: errNotFound}
}

// inlineLimit converts an inline limit and validates it (Limit.Validate),
// naming the field; tz resolves a calendar limit's time zone. The checks
// here are of the message's own shape: a period that is required or
// must be unset, a time zone without a calendar, an enum value out of
// range.
func inlineLimit(alg algorithms.Algorithm, pl *floodgatev1.Limit, tz *zones.Cache) (algorithms.Limit, error) {
	l := algorithms.Limit{Algorithm: alg, Requests: pl.GetRequests(), Burst: pl.GetBurst()}
	if pl.GetCalendar() != floodgatev1.Calendar_CALENDAR_UNSPECIFIED || pl.GetTimeZone() != "" {
		l.Calendar = algorithms.Calendar(pl.GetCalendar())
		switch {
		case pl.GetCalendar() == floodgatev1.Calendar_CALENDAR_UNSPECIFIED:
			return algorithms.Limit{}, invalidf("limit.time_zone", "applies only to a calendar limit (set limit.calendar)")
		case pl.GetCalendar() < 0 || !l.Calendar.Valid():
			return algorithms.Limit{}, invalidf("limit.calendar", "unknown value %d", int32(pl.GetCalendar()))
		case pl.GetPeriod() != nil && alg.Facts().Window:
			return algorithms.Limit{}, invalidf("limit.period", "must be unset with limit.calendar (the calendar %s is the window)", l.Calendar)
		}
	} else if p := pl.GetPeriod(); p != nil {
		if err := p.CheckValid(); err != nil {
			return algorithms.Limit{}, invalidf("limit.period", "%v", err)
		}
		l.Period = p.AsDuration()
	} else if l.Requests > 0 { // else Validate says what is wrong with requests first
		return algorithms.Limit{}, invalidf("limit.period", "required, e.g. \"60s\"")
	}
	if err := l.Validate(); err != nil {
		return algorithms.Limit{}, limitError(err)
	}
	if l.Calendar != algorithms.NoCalendar {
		loc, err := tz.Load(pl.GetTimeZone())
		if err != nil {
			return algorithms.Limit{}, invalidf("limit.time_zone", "%v", err)
		}
		l.Location = loc
	}
	return l, nil
}

// limitError is a Limit.Validate error as the API says it: the field
// under limit, the algorithms named as the proto enum names them.
func limitError(err error) error {
	le, ok := errors.AsType[*algorithms.LimitError](err)
	if !ok {
		return invalidf("limit", "%v", err)
	}
	field := "limit"
	if le.Field != "" {
		field += "." + le.Field
	}
	if le.Field != "" && len(le.Only) == 0 {
		return invalidf(field, "%s", le.Reason)
	}
	return invalidf(field, "%s", strings.TrimPrefix(le.Message(wireName), le.Field+" "))
}

// wireName is a's proto enum name (algorithms.Facts.Wire).
func wireName(a algorithms.Algorithm) string { return a.Facts().Wire }
