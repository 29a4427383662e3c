package store

import (
	"errors"
	"fmt"
)

// PartialError is the error of a Decide call on a store that routes a
// call's requests to several backing stores (store/splitstore) when some
// of them could not decide and the others could: Failed lists the indexes,
// in the call, of the requests whose store failed, and Err is why.
//
// The decisions of every other request are in out, decided as looks: as
// if each request were a dry run, so nothing was charged anywhere. The
// caller answers the failed requests by their failure modes and, when the
// call then passes, charges the others in a Decide call of their own (see
// server's storeDecide). It wraps Err, so a caller that knows nothing of it
// answers every request by its failure mode, as for any store error.
type PartialError struct {
	Failed []int
	Err    error
}

func (e *PartialError) Error() string {
	return fmt.Sprintf("%d of the call's requests could not be decided: %v", len(e.Failed), e.Err)
}

func (e *PartialError) Unwrap() error { return e.Err }

// AsPartial returns err's PartialError, or nil when err is not one.
func AsPartial(err error) *PartialError {
	var pe *PartialError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}
