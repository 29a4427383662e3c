package main

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate/internal/limited"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/rules"
)

// serveEnv is what serve's builders share: the checked flags, the failure
// mode they name, the logger, and the metrics with their registry.
type serveEnv struct {
	f           *serveFlags
	failureMode rules.FailureMode
	log         *slog.Logger
	reg         prometheus.Registerer
	metrics     *observability.Metrics
	limited     *limited.Tracker // nil: tracking off
}
