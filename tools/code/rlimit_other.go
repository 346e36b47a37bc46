//go:build !linux

package code

import "runtime/debug"

// limitProcess has no address-space cap to set outside Linux: the heap
// watchdog and the GC's memory limit are the memory bound there.
func limitProcess(l Limits) error {
	debug.SetMemoryLimit(heapLine(l.MemoryBytes) * 3 / 4)
	return nil
}
