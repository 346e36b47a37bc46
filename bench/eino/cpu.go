package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// tick is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const tick = 10 * time.Millisecond

// procCPU is a process's user and system CPU from /proc/PID/stat, all its
// threads together.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read cpu of %d: %w", pid, err)
	}
	return parseStat(b)
}

// parseStat reads utime and stime, fields 14 and 15; the command before
// them is in parentheses and may hold spaces, so fields count from its end.
func parseStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse stat: no command")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("parse stat: %d fields", len(f))
	}
	user, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse utime: %w", err)
	}
	sys, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse stime: %w", err)
	}
	return time.Duration(user+sys) * tick, nil
}

// selfCPU is this process's user and system CPU, to the microsecond.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pgSnapshot is the CPU of PostgreSQL's processes at one moment, by pid:
// the backends serving one database, and every process named postgres.
type pgSnapshot struct {
	db, all map[int]time.Duration
}

// snapshotPostgres reads every process named postgres. A backend's process
// title reads "postgres: [CLUSTER: ]USER DATABASE HOST(PORT) STATE", which
// is how the backends of the bench's own database are told from those of
// others sharing the cluster.
func snapshotPostgres(database string) pgSnapshot {
	s := pgSnapshot{db: map[int]time.Duration{}, all: map[int]time.Duration{}}
	if database == "" {
		return s
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(d + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		cpu, err := procCPU(pid)
		if err != nil {
			continue // ended meanwhile
		}
		s.all[pid] = cpu
		title, _ := os.ReadFile(d + "/cmdline")
		if backendDatabase(string(title)) == database {
			s.db[pid] = cpu
		}
	}
	return s
}

// pgDelta is what PostgreSQL's processes spent between two snapshots, and
// how many of the database's backends ended in between (their CPU since the
// first snapshot is lost: a figure with ended backends is a lower bound).
type pgDelta struct {
	db, all time.Duration
	ended   int
}

func (s pgSnapshot) since(before pgSnapshot) pgDelta {
	var d pgDelta
	d.db = sumSince(s.db, before.db)
	d.all = sumSince(s.all, before.all)
	for pid := range before.db {
		if _, ok := s.db[pid]; !ok {
			d.ended++
		}
	}
	return d
}

func (d pgDelta) add(e pgDelta) pgDelta {
	return pgDelta{db: d.db + e.db, all: d.all + e.all, ended: d.ended + e.ended}
}

// sumSince adds each process's CPU since before; a process started since
// counts whole.
func sumSince(after, before map[int]time.Duration) time.Duration {
	var sum time.Duration
	for pid, cpu := range after {
		sum += cpu - before[pid]
	}
	return sum
}

// backendDatabase is the database a backend's process title names, or ""
// for a title that is not a client backend's.
func backendDatabase(title string) string {
	f := strings.Fields(strings.ReplaceAll(title, "\x00", " "))
	if len(f) == 0 || f[0] != "postgres:" {
		return ""
	}
	f = f[1:]
	if len(f) > 0 && strings.HasSuffix(f[0], ":") { // cluster_name
		f = f[1:]
	}
	// USER DATABASE HOST(PORT) STATE; the server's own processes have no
	// HOST(PORT) (a local socket's is "[local]").
	if len(f) < 3 || (!strings.HasSuffix(f[2], ")") && f[2] != "[local]") {
		return ""
	}
	return f[1]
}
