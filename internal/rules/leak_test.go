package rules

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a Watcher's goroutine outlives
// them (every test closes its Watchers).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
