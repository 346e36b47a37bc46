package code

import "syscall"

// sysProcAttr makes the child die with the server, in a process group of
// its own.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
