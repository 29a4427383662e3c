package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/floodgate/floodgate/internal/filewatch"
)

// fileSet is a value parsed from the contents of files: name ("tls
// certificate", "auth tokens") begins its log messages, parse makes the
// value from the contents of paths (in their order), and describe gives a
// loaded value's log attributes, never a secret.
type fileSet[T any] struct {
	name     string
	paths    []string
	parse    func(contents [][]byte) (*T, error)
	describe func(*T) []any
}

// watch keeps the value of fs current with a filewatch.Watcher until ctx
// ends or it is closed. A value that fails to load is logged once while
// the files stay the same, and the previous one keeps serving.
func (fs fileSet[T]) watch(ctx context.Context, log *slog.Logger) (*filewatch.Watcher[T], error) {
	name, paths, parse, describe := fs.name, fs.paths, fs.parse, fs.describe
	loaded := false
	return filewatch.Watch(ctx, filewatch.Options[T]{
		Paths: paths,
		Load: func() (*T, error) {
			contents := make([][]byte, len(paths))
			for i, p := range paths {
				b, err := os.ReadFile(p)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				contents[i] = b
			}
			v, err := parse(contents)
			if err != nil {
				return nil, fmt.Errorf("%s from %s: %w", name, paths[0], err)
			}
			return v, nil
		},
		OnLoad: func(v *T) {
			msg := name + " reloaded"
			if !loaded {
				msg, loaded = name+" loaded", true
			}
			log.Info(msg, describe(v)...)
		},
		OnError: func(err error) {
			if _, ok := errors.AsType[*filewatch.WatchError](err); ok {
				log.Warn(name+": file events unavailable", "err", err)
				return
			}
			log.Error(name+" reload rejected; the previous one keeps serving", "err", err)
		},
	})
}
