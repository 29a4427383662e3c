package server_test

import (
	"context"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// failingStore is a real store whose Decide fails; the error path of the
// decorator needs one.
type failingStore struct{ store.Store }

func (failingStore) Decide(context.Context, time.Time, []store.Request, []algorithms.Decision) error {
	return fmt.Errorf("redis: %w", store.ErrUnavailable)
}
