//go:build !linux

package document

import "syscall"

// limitProcess has no caps to set outside Linux: the heap watch and the
// wall-time bound are the box there.
func limitProcess(Limits) error { return nil }

func sysProcAttr() *syscall.SysProcAttr { return nil }
