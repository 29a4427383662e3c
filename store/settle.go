package store

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// DefaultSettleWindow is how long a store remembers a settlement's
// idempotency key by default: a retry within it charges nothing again.
const DefaultSettleWindow = 24 * time.Hour

// MaxIdempotencyKeyLen bounds Settlement.IdempotencyKey, in bytes.
const MaxIdempotencyKeyLen = 128

// Settlement is usage known only afterwards (an LLM call's tokens): the
// key reserved Reserved units earlier (a Check charged them; 0 when
// nothing was reserved) and used Actual. The difference is charged as
// debt (algorithms.Debt) or refunded.
type Settlement struct {
	// Key and Scope name the state, as in Request.
	Key, Scope string
	// Limit is the rate, as in Request. It must be valid.
	Limit algorithms.Limit
	// Reserved is what an earlier check charged, >= 0.
	Reserved int64
	// Actual is the usage, >= 0.
	Actual int64
	// IdempotencyKey names the settlement: the first Settle with it
	// charges, a retry with the same key and numbers (within the store's
	// settle window) charges nothing and answers Duplicate. Required, at
	// most MaxIdempotencyKeyLen bytes.
	IdempotencyKey string
}

// Delta is the units the settlement charges: Actual − Reserved (a refund
// when negative).
func (s Settlement) Delta() int64 { return s.Actual - s.Reserved }

// Fingerprint is what a store records under the idempotency key, to tell
// a retry from a reuse of the key with other numbers.
func (s Settlement) Fingerprint() string {
	le := binary.LittleEndian
	return string(le.AppendUint64(le.AppendUint64(nil, uint64(s.Reserved)), uint64(s.Actual)))
}

// SettleResult is a settlement's answer.
type SettleResult struct {
	// Decision is the key's state after the settlement (algorithms.Settle):
	// Limit, Remaining (0 while in debt), Debt, Unrecorded, ResetAfter,
	// and RetryAfter until a check of cost 1 passes. On a duplicate it is
	// the key's state now, Unrecorded 0.
	Decision algorithms.Decision
	// Duplicate reports that the idempotency key was already settled:
	// nothing was charged this time.
	Duplicate bool
}

// Settler is a Store that can settle usage known only afterwards. Both
// floodgate stores implement it; the charge and the idempotency record
// are written atomically (one shard lock, one Redis script).
type Settler interface {
	// Settle charges s.Delta() against the key (debt or refund) unless
	// s.IdempotencyKey was settled before, and answers the key's numbers.
	// A reuse of the idempotency key with other numbers returns an error
	// wrapping ErrSettleConflict and charges nothing.
	Settle(ctx context.Context, now time.Time, s Settlement) (SettleResult, error)
}

// ErrSettleConflict is wrapped by the error Settle returns when its
// idempotency key was settled before with other numbers.
var ErrSettleConflict = errors.New("idempotency key already settled with other numbers")

// ValidateSettlement reports what is wrong with s, wrapping ErrInvalid.
func ValidateSettlement(s Settlement) error {
	switch {
	case s.Reserved < 0 || s.Reserved > algorithms.MaxScaled:
		return errors.Join(ErrInvalid, errors.New("reserved must be in [0, 2^50]"))
	case s.Actual < 0 || s.Actual > algorithms.MaxScaled:
		return errors.Join(ErrInvalid, errors.New("actual must be in [0, 2^50]"))
	case s.IdempotencyKey == "":
		return errors.Join(ErrInvalid, errors.New("idempotency key is required"))
	case len(s.IdempotencyKey) > MaxIdempotencyKeyLen:
		return errors.Join(ErrInvalid, errors.New("idempotency key longer than 128 bytes"))
	}
	if err := s.Limit.Validate(); err != nil {
		return errors.Join(ErrInvalid, err)
	}
	return nil
}
