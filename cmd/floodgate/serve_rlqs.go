package main

import (
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate/server/rlqs"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
	"github.com/floodgate/floodgate/store/redisstore"
)

// quotaRedisTimeout bounds one demand aggregation in Redis (a pipeline of
// one script call per bucket of a report). Shares are not on any
// request's path, so it is far above --redis-timeout: a slow Redis delays
// an assignment rather than falling back to this replica's own view.
const quotaRedisTimeout = time.Second

// openQuota builds the Rate Limit Quota Service: its demand aggregation
// is in Redis when --redis-url is given (a client of its own, with the
// same flags, so replicas agree on shares), in memory otherwise. The
// returned closer releases the Redis client.
func openQuota(f serveFlags, cfg rlqs.RuleSource, reg prometheus.Registerer, log *slog.Logger) (*rlqs.Service, io.Closer, error) {
	var demand store.DemandStore = memstore.NewDemand()
	var closer io.Closer = io.NopCloser(nil)
	if f.redisConn.URL != "" {
		c := f.redisConn
		c.PoolSize, c.ReadTimeout, c.WriteTimeout = min(max(c.PoolSize, 0), 4), quotaRedisTimeout, quotaRedisTimeout
		client, err := redisstore.NewClient(c)
		if err != nil {
			return nil, nil, err
		}
		d, err := redisstore.NewDemand(client, f.redis.Prefix, quotaRedisTimeout)
		if err != nil {
			return nil, nil, errors.Join(err, client.Close())
		}
		demand, closer = d, client
	}
	s := f.quota
	s.Rules, s.Demand, s.MaxKeyBytes, s.Logger, s.Metrics = cfg, demand, f.maxKeyBytes, log, rlqs.NewMetrics(reg)
	return rlqs.New(s), closer, nil
}
