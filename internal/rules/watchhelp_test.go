package rules

import "context"

// watch is Watch with the default Options.
func watch(ctx context.Context, path string, onLoad func(*Set), onError func(error)) (*Watcher, error) {
	return Watch(ctx, path, Options{}, onLoad, onError)
}

// current is the config w has in force.
func current(w *Watcher) *Set { return w.files.Current() }
