package rules

import (
	"context"

	"github.com/floodgate/floodgate/internal/filewatch"
)

// watch is Watch with the default Options.
func watch(ctx context.Context, path string, onLoad func(*Set), onError func(error)) (*filewatch.Watcher[Set], error) {
	return Watch(ctx, path, Options{}, onLoad, onError)
}

// current is the config w has in force.
func current(w *filewatch.Watcher[Set]) *Set { return w.Current() }
