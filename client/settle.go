package client

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// Settlement is floodgate's answer to a Settle: the key's numbers after
// usage known only afterwards was charged (or a reservation's unused part
// given back).
type Settlement struct {
	// Limit is the capacity that applied.
	Limit int64
	// Remaining is how many units can still be spent now; 0 in debt.
	Remaining int64
	// Debt is how many units the key owes now: checks are denied until
	// the limit's rate has repaid it.
	Debt int64
	// RetryAfter is 0 if a check of cost 1 passes now; otherwise the exact
	// wait until it would.
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back to its full limit.
	ResetAfter time.Duration
	// Unrecorded is the usage floodgate did not record: the debt reached
	// its bound (one capacity), or the limit keeps a log, which was full.
	Unrecorded int64
	// Duplicate says this settlement's idempotency key was settled
	// before: nothing was charged again.
	Duplicate bool
	// Degraded says floodgate's store could not decide: nothing is known
	// to be charged. Settle again with the same idempotency key (a
	// Reservation does): it charges at most once.
	Degraded bool
}

// Settle charges usage known only afterwards: actual units, of which
// reserved were charged by an earlier Check (0: none; usage after the
// fact). The difference goes into debt (admitted even past the limit) or
// is given back. idempotencyKey names the settlement: a retry with the
// same key (and numbers) charges nothing again, so Settle is safe to
// retry. Most callers want Reserve, which makes the key.
func (c *Client) Settle(ctx context.Context, key string, limit Limit, reserved, actual int64, idempotencyKey string) (Settlement, error) {
	alg, inline, policy, err := limit.source()
	if err != nil {
		return Settlement{}, fmt.Errorf("floodgate settle: %w", err)
	}
	req := &floodgatev1.SettleRequest{Key: key, Algorithm: alg, Reserved: reserved, Actual: actual, IdempotencyKey: idempotencyKey}
	req.Source = &floodgatev1.SettleRequest_Policy{Policy: policy}
	if inline != nil {
		req.Source = &floodgatev1.SettleRequest_Limit{Limit: inline}
	}
	resp, err := call(ctx, c, c.rl.Settle, req)
	if err != nil {
		return Settlement{}, fmt.Errorf("floodgate settle: %w", err)
	}
	return Settlement{
		Limit: resp.GetLimit(), Remaining: resp.GetRemaining(), Debt: resp.GetDebt(),
		RetryAfter: resp.GetRetryAfter().AsDuration(), ResetAfter: resp.GetResetAfter().AsDuration(),
		Unrecorded: resp.GetUnrecorded(), Duplicate: resp.GetDuplicate(), Degraded: resp.GetDegraded(),
	}, nil
}

// Charge charges usage that already happened, with nothing reserved:
// Settle with reserved 0. It is never refused (over the limit it is debt).
func (c *Client) Charge(ctx context.Context, key string, limit Limit, actual int64, idempotencyKey string) (Settlement, error) {
	return c.Settle(ctx, key, limit, 0, actual, idempotencyKey)
}

// Reservation is an estimate charged by Reserve, to be settled with the
// actual usage once known.
type Reservation struct {
	// Decision is the reserving check's answer. When it is not Allowed,
	// nothing was reserved; Settle then charges the whole usage.
	Decision Decision

	c        *Client
	key      string
	limit    Limit
	reserved int64
	id       string // the idempotency key, made once
}

// Reserve checks estimate units against key's limit, as Check does, and
// returns a Reservation to settle with the actual usage:
//
//	r, err := c.Reserve(ctx, "tenant:42", tokensPerMinute, 500)
//	if err != nil || !r.Decision.Allowed { ... }
//	used := callTheModel()
//	_, err = r.Settle(ctx, used) // retry on error: it charges once
func (c *Client) Reserve(ctx context.Context, key string, limit Limit, estimate int64) (*Reservation, error) {
	d, err := c.Check(ctx, Request{Key: key, Limit: limit, Cost: estimate})
	if err != nil {
		return nil, err
	}
	r := &Reservation{Decision: d, c: c, key: key, limit: limit, id: "rsv-" + rand.Text()}
	if d.Allowed && !d.Degraded {
		r.reserved = max(estimate, 1)
	}
	return r, nil
}

// IdempotencyKey is the key every Settle of r sends.
func (r *Reservation) IdempotencyKey() string { return r.id }

// Settle charges the actual usage: the part above the reservation as debt,
// or gives the unused part back. It carries r's idempotency key, so it is
// safe to retry (after a timeout, or a Degraded answer): floodgate charges
// once. Call it with the same actual each time.
func (r *Reservation) Settle(ctx context.Context, actual int64) (Settlement, error) {
	return r.c.Settle(ctx, r.key, r.limit, r.reserved, actual, r.id)
}
