package redisstore

import (
	"context"
	"fmt"
)

// run executes calls, through the batcher when there is one, and returns
// the first error.
func (s *Store) run(ctx context.Context, calls []*call) error {
	if s.batch == nil {
		s.exec(ctx, calls)
	} else if err := s.batch.submit(ctx, calls); err != nil {
		return err
	}
	for _, c := range calls {
		select {
		case <-c.done:
			if c.err != nil {
				return c.err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// exec sends calls to Redis and hands each to its done channel. Calls of
// one slot with the same header travel in one function call, each a
// group of its own (lua/decide.lua), so Redis runs one script for many
// decisions.
func (s *Store) exec(ctx context.Context, calls []*call) {
	if units := merge(calls); len(units) == 1 {
		units[0].split(s.fcall(ctx, s.lib.decide, units[0].keys, units[0].args...))
	} else {
		cmds := s.lib.pipeline(ctx, s.client, s.lib.decide, len(units), func(i int) ([]string, []any) { return units[i].keys, units[i].args })
		for i, cmd := range cmds {
			reply, err := cmd.Result()
			units[i].split(reply, fcallErr(err))
		}
	}
	for _, c := range calls {
		c.done <- c
	}
}

// unit is one script call carrying one or more calls, each a group.
type unit struct {
	calls []*call
	keys  []string
	args  []any // the first call's buf (with the header), then the others' requests
}

// mergeKey groups calls that may share a script call: one slot, one
// wire header. Floodgate's clock (header.calMs) is not part of it: only
// each calendar request's boundaries depend on it, and they travel in
// the request, so calls made in different milliseconds still merge.
type mergeKey struct {
	slot          int
	nowMs, keepMs int64
	probe         bool
}

// merge packs calls into units: the calls of one mergeKey in one unit,
// each a group (an ARGV, a slice of its call's buf) of its own.
func merge(calls []*call) []*unit {
	units := make([]*unit, 0, 1)
	byKey := map[mergeKey]*unit{}
	for _, c := range calls {
		k := mergeKey{c.slot, c.h.nowMs, c.h.keepMs, c.h.probe}
		u := byKey[k]
		if u == nil {
			u = &unit{calls: []*call{c}, keys: c.keys, args: []any{c.buf}}
			byKey[k] = u
			units = append(units, u)
			continue
		}
		if len(u.calls) == 1 { // copy before appending: c.keys belongs to the call
			u.keys = append(make([]string, 0, 4*len(u.keys)), u.keys...)
		}
		u.calls = append(u.calls, c)
		u.keys = append(u.keys, c.keys...)
		u.args = append(u.args, c.buf[hdrLen:])
	}
	return units
}

// split hands each call of u its part of the unit's reply.
func (u *unit) split(reply any, err error) {
	if err == nil && reply == late {
		err = errLate
	}
	if len(u.calls) == 1 {
		u.calls[0].reply, u.calls[0].err = reply, err
		return
	}
	str, ok := reply.(string)
	if err == nil && (!ok || recordsLen(str, len(u.keys)) != len(str)) {
		err = fmt.Errorf("%w: %d bytes for %d requests", errReply, len(str), len(u.keys))
	}
	off := 0
	for _, c := range u.calls {
		if err != nil {
			c.err = err
			continue
		}
		n := recordsLen(str[off:], len(c.keys))
		c.reply = str[off : off+n]
		off += n
	}
}
