// Package batch orders the calls of one model answer. Calls run at once
// where that cannot change an answer; where it can, they keep an order the
// tools' definitions decide (tools.Definition.Reads and Writes), never
// their names: calls that write a resource run in the model's order, and
// calls that read it run after them. An edit and a search of the same
// workspace in one batch then always search the edited files.
package batch

import (
	"slices"
	"sync"

	"github.com/toolgate/toolgate/tools"
)

// Plan returns, for each call of a batch (defs[i] is the definition of the
// i-th call; a zero Definition for a tool not offered), the calls it waits
// for. A call that writes a resource waits for the previous writer of it;
// a call that only reads it waits for its last writer, wherever that comes
// in the batch. Should two calls each read what the other writes, no order
// satisfies both: the whole batch then runs in the model's order.
func Plan(defs []tools.Definition) [][]int {
	last := map[tools.Resource]int{}
	for i, d := range defs {
		for _, r := range d.Writes {
			last[r] = i
		}
	}
	deps := make([][]int, len(defs))
	prev := map[tools.Resource]int{}
	for i, d := range defs {
		for _, r := range d.Writes {
			if j, ok := prev[r]; ok {
				deps[i] = appendNew(deps[i], j)
			}
			prev[r] = i
		}
		for _, r := range d.Reads {
			if slices.Contains(d.Writes, r) {
				continue
			}
			if j, ok := last[r]; ok {
				deps[i] = appendNew(deps[i], j)
			}
		}
	}
	if cyclic(deps) {
		for i := range deps {
			deps[i] = nil
			if i > 0 {
				deps[i] = []int{i - 1}
			}
		}
	}
	return deps
}

func appendNew(s []int, v int) []int {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// cyclic reports whether some call waits, through others, for itself.
func cyclic(deps [][]int) bool {
	const (
		unseen = iota
		open
		done
	)
	state := make([]int, len(deps))
	var visit func(i int) bool
	visit = func(i int) bool {
		switch state[i] {
		case open:
			return true
		case done:
			return false
		}
		state[i] = open
		for _, j := range deps[i] {
			if visit(j) {
				return true
			}
		}
		state[i] = done
		return false
	}
	for i := range deps {
		if visit(i) {
			return true
		}
	}
	return false
}

// Run calls fn for every call of a batch, each once its deps (as Plan
// returns them) have returned, at most limit at a time, and returns when
// all have. fn must return: a call's waiters wait for it.
func Run(deps [][]int, limit int, fn func(i int)) {
	if limit <= 0 {
		limit = 1
	}
	done := make([]chan struct{}, len(deps))
	for i := range done {
		done[i] = make(chan struct{})
	}
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range deps {
		wg.Go(func() {
			defer close(done[i])
			for _, j := range deps[i] {
				<-done[j]
			}
			// Taken after the waits: a call holding a slot while it waits
			// could keep the call it waits for from ever getting one.
			sem <- struct{}{}
			defer func() { <-sem }()
			fn(i)
		})
	}
	wg.Wait()
}
