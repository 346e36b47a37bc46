//go:build !linux

package code

// limitProcess has no address-space cap to set outside Linux: the heap
// watchdog is the memory bound there.
func limitProcess(Limits) error { return nil }
