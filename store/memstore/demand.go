package memstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/floodgate/floodgate/store"
)

// Demand is the embedded store.DemandStore: the demand reports of one
// floodgate process, in memory. Reports past their TTL are dropped when
// their key is next reported, and by a sweep of every key once every
// demandSweepEvery reports, so memory follows the live reporters.
type Demand struct {
	mu      sync.Mutex
	keys    map[string]map[string]demandEntry
	reports int
}

type demandEntry struct {
	milliRPS int64
	expires  time.Time
}

// demandSweepEvery is how many reports pass between sweeps of every key.
const demandSweepEvery = 4096

var _ store.DemandStore = (*Demand)(nil)

// NewDemand returns an empty Demand.
func NewDemand() *Demand { return &Demand{keys: map[string]map[string]demandEntry{}} }

// ReportDemand implements store.DemandStore.
func (d *Demand) ReportDemand(_ context.Context, now time.Time, reports []store.DemandReport, out []store.DemandTotal) error {
	if len(out) != len(reports) {
		return fmt.Errorf("memstore: report demand: %w: %d reports but %d totals", store.ErrInvalid, len(reports), len(out))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, r := range reports {
		if r.TTL <= 0 {
			return fmt.Errorf("memstore: report demand: %w: TTL %v is not positive", store.ErrInvalid, r.TTL)
		}
		m := d.keys[r.Key]
		if m == nil {
			m = map[string]demandEntry{}
			d.keys[r.Key] = m
		}
		m[r.Reporter] = demandEntry{milliRPS: r.MilliRPS, expires: now.Add(r.TTL)}
		var t store.DemandTotal
		for rep, e := range m {
			if !e.expires.After(now) {
				delete(m, rep)
				continue
			}
			t.Reporters++
			t.MilliRPS += e.milliRPS
		}
		out[i] = t
	}
	if d.reports += len(reports); d.reports >= demandSweepEvery {
		d.reports = 0
		d.sweep(now)
	}
	return nil
}

// sweep drops every expired report and every key left without one.
func (d *Demand) sweep(now time.Time) {
	for k, m := range d.keys {
		for rep, e := range m {
			if !e.expires.After(now) {
				delete(m, rep)
			}
		}
		if len(m) == 0 {
			delete(d.keys, k)
		}
	}
}

// ForgetDemand implements store.DemandStore.
func (d *Demand) ForgetDemand(_ context.Context, key, reporter string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if m := d.keys[key]; m != nil {
		delete(m, reporter)
		if len(m) == 0 {
			delete(d.keys, key)
		}
	}
	return nil
}

// Len returns the keys held (for tests and metrics).
func (d *Demand) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.keys)
}
