package document

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// limitProcess caps the child: its address space at what it maps now plus
// the memory bound (an allocation past it fails, and the Go runtime stops
// the process), its CPU time at the CPU bound (SIGXCPU, which the child
// turns into its exit; the hard limit a second later kills it), and no
// core dumps.
func limitProcess(l Limits) error {
	base, err := mappedBytes()
	if err != nil {
		return err
	}
	as := uint64(base + l.MemoryBytes + raceHeadroom)
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: as, Max: as}); err != nil {
		return err
	}
	cpu := uint64(max(l.CPU.Seconds(), 1))
	if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: cpu, Max: cpu + 1}); err != nil {
		return err
	}
	return syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
}

// mappedBytes is the process's address space now (VmSize).
func mappedBytes() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmSize:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte("kB")))), 10, 64)
			return kb << 10, err
		}
	}
	return 0, os.ErrNotExist
}

// sysProcAttr makes the child die with the server, in a process group of
// its own.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
