package main

import (
	"context"
	"log/slog"
	"os"
)

// reloadable is one file-backed setting that a SIGHUP reloads: the rules,
// the TLS certificate (with the client CAs), the tokens.
type reloadable struct {
	name   string
	reload func() error
}

// reloadOnHangup reloads every item each time hup delivers (a SIGHUP),
// until ctx ends: "now", where file events are missing or late. A file
// that fails to load keeps its previous value.
func reloadOnHangup(ctx context.Context, hup <-chan os.Signal, items []reloadable, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		var reloaded, failed []string
		for _, it := range items {
			if err := it.reload(); err != nil {
				failed = append(failed, it.name)
				log.Error("SIGHUP: reload failed; the previous value keeps serving", "what", it.name, "err", err)
				continue
			}
			reloaded = append(reloaded, it.name)
		}
		log.Info("SIGHUP: files reloaded", "reloaded", reloaded, "failed", failed)
	}
}
