//go:build unix

package result

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used: on a shared machine a
// benchmark's wall time says as much about the neighbours as about it.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
