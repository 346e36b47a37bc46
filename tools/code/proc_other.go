//go:build !linux

package code

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
