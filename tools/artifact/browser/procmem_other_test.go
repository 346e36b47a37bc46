//go:build !linux

package browser_test

import (
	"testing"
	"time"
)

// treeMemory has no /proc to read here: the benchmarks report Go's
// allocations only.
type treeMemory struct{}

func watchTree(*testing.B, int, time.Duration) *treeMemory { return nil }

func (m *treeMemory) report(*testing.B) {}
