//go:build unix

package loadgen

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) this process has used so far;
// 0 when it cannot be read.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru) // on error ru stays zero
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
