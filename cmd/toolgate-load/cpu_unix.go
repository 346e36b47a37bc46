//go:build unix

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// selfCPU is the CPU this program has used, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU is the CPU seconds, user and system, a process on this
// machine has used, from /proc (Linux).
func processCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read server CPU: %w", err)
	}
	// The command name, in parentheses, may hold spaces: fields are counted
	// after it. utime and stime are the 14th and 15th fields, in ticks.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0, fmt.Errorf("read server CPU: /proc/%d/stat is not as expected", pid)
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("read server CPU: /proc/%d/stat is not as expected", pid)
	}
	return (utime + stime) / clockTicks, nil
}

// clockTicks is USER_HZ, 100 on every Linux port Go runs on.
const clockTicks = 100
