package redistest

import "syscall"

// sysProcAttr makes a server die with the test process, so a test binary
// killed by a timeout leaves no redis-server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
