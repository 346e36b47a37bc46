//go:build !unix

package main

import (
	"errors"
	"time"
)

// selfCPU is not measured here.
func selfCPU() time.Duration { return 0 }

// processCPU is not read here: the server's /metrics is.
func processCPU(int) (float64, error) {
	return 0, errors.New("read server CPU: -server-pid needs Linux's /proc; leave it out to read /metrics")
}
