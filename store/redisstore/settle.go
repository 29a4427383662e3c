package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// settleReplyLen is the settle script's reply: allowed, remaining,
// retry_after_ms, reset_after_ms, ttl_ms, debt, unrecorded, duplicate.
const settleReplyLen = 1 + 6*8 + 1

var _ store.Settler = (*Store)(nil)

// Settle implements store.Settler: one call of the library's settle
// function charges the delta and sets the settlement's record (settleKey,
// with a TTL of Config.SettleWindow), so a retry after a reply lost to a
// timeout finds the record and charges nothing.
func (s *Store) Settle(ctx context.Context, now time.Time, st store.Settlement) (store.SettleResult, error) {
	if err := ctx.Err(); err != nil {
		return store.SettleResult{}, fmt.Errorf("redisstore: settle: %w", err)
	}
	if err := store.ValidateSettlement(st); err != nil {
		return store.SettleResult{}, fmt.Errorf("redisstore: settle: %w", err)
	}
	// The settle function takes what a decide call of the delta, charged
	// as debt, takes (plan), and the record's key after the state's.
	h := s.header(now)
	c := s.plan([]store.Request{{Key: st.Key, Scope: st.Scope, Limit: st.Limit, Cost: st.Delta(), Mode: algorithms.Debt}}, h, 1)[0]
	c.keys = append(c.keys, settleKey(s.cfg.Prefix, st.Limit.Algorithm, hashTag(st.Key), st.Scope, st.IdempotencyKey))
	tctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	// The call may outlive the timeout (go-redis reads until its own
	// ReadTimeout): its answer is then dropped, and the charge, if Redis
	// ran it, is found by the retry's record.
	go func() {
		c.reply, c.err = s.fcall(tctx, s.lib.settle, c.keys, c.buf, st.Fingerprint(), strconv.FormatInt(s.cfg.SettleWindow.Milliseconds()+h.keepMs, 10))
		c.done <- c
	}()
	if err := wait(tctx, c); err != nil {
		if strings.Contains(err.Error(), "settle conflict") {
			return store.SettleResult{}, fmt.Errorf("redisstore: settle: %w", store.ErrSettleConflict)
		}
		return store.SettleResult{}, s.wrap(ctx, "settle", err)
	}
	return decodeSettleReply(c.reply, st.Limit.Capacity())
}

// decodeSettleReply reads the settle script's reply, checking every
// field; limit is the settlement's capacity.
func decodeSettleReply(reply any, limit int64) (store.SettleResult, error) {
	str, ok := reply.(string)
	if !ok || len(str) != settleReplyLen {
		return store.SettleResult{}, fmt.Errorf("redisstore: settle: %w: %T of %d bytes", errReply, reply, len(str))
	}
	remaining, retryMs, resetMs, ttlMs := le64(str[1:]), le64(str[9:]), le64(str[17:]), le64(str[25:])
	debt, unrecorded := le64(str[33:]), le64(str[41:])
	dup := str[49]
	if str[0] != 1 || remaining < 0 || retryMs < 0 || resetMs < 0 || ttlMs < 0 || debt < 0 || unrecorded < 0 || dup > 1 {
		return store.SettleResult{}, fmt.Errorf("redisstore: settle: %w: fields out of range", errReply)
	}
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	return store.SettleResult{
		Decision: algorithms.Decision{
			Allowed: true, Limit: limit, Remaining: remaining,
			RetryAfter: ms(retryMs), ResetAfter: ms(resetMs), TTL: ms(ttlMs),
			Debt: debt, Unrecorded: unrecorded,
		},
		Duplicate: dup == 1,
	}, nil
}
