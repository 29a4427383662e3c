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

// decodeSettleReply reads the settle function's reply, a decide record
// (decodeReply) followed by debt and unrecorded (int64s) and duplicate (a
// byte), checking every field; limit is the settlement's capacity.
func decodeSettleReply(reply any, limit int64) (store.SettleResult, error) {
	str, ok := reply.(string)
	n := len(str) - 17
	if !ok || n < 0 {
		return store.SettleResult{}, fmt.Errorf("redisstore: settle: %w: %T of %d bytes", errReply, reply, len(str))
	}
	var d [1]algorithms.Decision
	if err := decodeReply(str[:n], d[:], func(int) int64 { return limit }); err != nil {
		return store.SettleResult{}, fmt.Errorf("redisstore: settle: %w", err)
	}
	debt, unrecorded, dup := le64(str[n:]), le64(str[n+8:]), str[n+16]
	if !d[0].Allowed || debt < 0 || unrecorded < 0 || dup > 1 {
		return store.SettleResult{}, fmt.Errorf("redisstore: settle: %w: fields out of range", errReply)
	}
	d[0].Debt, d[0].Unrecorded = debt, unrecorded
	return store.SettleResult{Decision: d[0], Duplicate: dup == 1}, nil
}
