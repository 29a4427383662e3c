package auth_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: the
// file watchers behind NewTLSConfig and NewTokenAuth must be closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
