package rlqs

import (
	"time"
)

// logEvery is the least time between two log lines of one kind (demand
// store failures, dropped bucket ids); the next line counts those between.
const logEvery = 10 * time.Second

// demandFailed logs a demand store failure at now, unless one was logged
// less than logEvery ago.
func (s *Service) demandFailed(now time.Time, err error) {
	if n, ok := s.failures.Allow(now, logEvery); ok {
		s.log.Warn("quota: demand not aggregated across replicas; shares come from the last totals or this replica's view",
			"err", err, "failures_since_last_log", n)
	}
}
