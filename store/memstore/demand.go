package memstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/floodgate/floodgate/store"
)

// Demand is the embedded store.DemandStore: the demand reports of one
// floodgate process, in memory. Like the Redis twin (redisstore's
// demand.lua) each key keeps running totals, exact while no report has
// expired, so a report costs O(1) but for one scan of the key's reporters
// once its earliest report expires. Keys whose reports all expired are
// dropped by a sweep of every key once every demandSweepEvery reports, so
// memory follows the live reporters.
type Demand struct {
	mu      sync.Mutex
	keys    map[string]*demandKey
	reports int
}

// demandKey is one budget's reports and their totals (expired reports
// included until the next scan; none has expired before min).
type demandKey struct {
	reports map[string]demandEntry
	total   store.DemandTotal
	min     time.Time
}

// expire drops the reports expired at now and recomputes the totals, once
// the earliest report has expired.
func (k *demandKey) expire(now time.Time) {
	if now.Before(k.min) {
		return
	}
	k.total, k.min = store.DemandTotal{}, time.Time{}
	for rep, e := range k.reports {
		if !e.expires.After(now) {
			delete(k.reports, rep)
			continue
		}
		k.add(e)
	}
}

// add counts e in the totals.
func (k *demandKey) add(e demandEntry) {
	k.total.Reporters++
	k.total.MilliRPS += e.milliRPS
	if k.min.IsZero() || e.expires.Before(k.min) {
		k.min = e.expires
	}
}

type demandEntry struct {
	milliRPS int64
	expires  time.Time
}

// demandSweepEvery is how many reports pass between sweeps of every key.
const demandSweepEvery = 4096

var _ store.DemandStore = (*Demand)(nil)

// NewDemand returns an empty Demand.
func NewDemand() *Demand { return &Demand{keys: map[string]*demandKey{}} }

// ReportDemand implements store.DemandStore.
func (d *Demand) ReportDemand(_ context.Context, now time.Time, reports []store.DemandReport, out []store.DemandTotal) error {
	if err := store.ValidateDemand(reports, out); err != nil {
		return fmt.Errorf("memstore: report demand: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, r := range reports {
		k := d.keys[r.Key]
		if k == nil {
			k = &demandKey{reports: map[string]demandEntry{}}
			d.keys[r.Key] = k
		}
		if old, ok := k.reports[r.Reporter]; ok {
			k.total.Reporters--
			k.total.MilliRPS -= old.milliRPS
		}
		e := demandEntry{milliRPS: r.MilliRPS, expires: now.Add(r.TTL)}
		k.reports[r.Reporter] = e
		k.add(e)
		k.expire(now)
		out[i] = k.total
	}
	if d.reports += len(reports); d.reports >= demandSweepEvery {
		d.reports = 0
		d.sweep(now)
	}
	return nil
}

// sweep drops every expired report and every key left without one.
func (d *Demand) sweep(now time.Time) {
	for key, k := range d.keys {
		if k.expire(now); len(k.reports) == 0 {
			delete(d.keys, key)
		}
	}
}

// ForgetDemand implements store.DemandStore.
func (d *Demand) ForgetDemand(_ context.Context, key, reporter string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if k := d.keys[key]; k != nil {
		if old, ok := k.reports[reporter]; ok {
			delete(k.reports, reporter)
			k.total.Reporters--
			k.total.MilliRPS -= old.milliRPS
		}
		if len(k.reports) == 0 {
			delete(d.keys, key)
		}
	}
	return nil
}
