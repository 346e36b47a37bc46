package batch_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/runtime/batch"
	"github.com/toolgate/toolgate/tools"
)

var (
	ws    = tools.ResourceWorkspace
	tasks = tools.ResourceTasks
	read  = tools.Definition{Name: "read", Reads: []tools.Resource{ws}}
	write = tools.Definition{Name: "write", Writes: []tools.Resource{ws}}
	both  = tools.Definition{Name: "both", Reads: []tools.Resource{ws}, Writes: []tools.Resource{ws}}
	plan  = tools.Definition{Name: "plan", Writes: []tools.Resource{tasks}}
	calc  = tools.Definition{Name: "calc"}
	// cross reads what swap writes and writes what swap reads.
	cross = tools.Definition{Name: "cross", Reads: []tools.Resource{ws}, Writes: []tools.Resource{tasks}}
	swap  = tools.Definition{Name: "swap", Reads: []tools.Resource{tasks}, Writes: []tools.Resource{ws}}
)

func TestPlan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give []tools.Definition
		want [][]int
	}{
		{name: "reads alone run at once", give: []tools.Definition{read, read, calc}, want: [][]int{nil, nil, nil}},
		{name: "a read after a write waits for it", give: []tools.Definition{write, read}, want: [][]int{nil, {0}}},
		{name: "a read before a write waits for it too", give: []tools.Definition{read, write}, want: [][]int{{1}, nil}},
		{name: "writes keep the model's order; reads wait for the last", give: []tools.Definition{write, read, write, calc},
			want: [][]int{nil, {2}, {0}, nil}},
		{name: "a call that reads and writes is ordered as a write", give: []tools.Definition{write, both, read},
			want: [][]int{nil, {0}, {1}}},
		{name: "other resources stay apart", give: []tools.Definition{write, plan, read, plan},
			want: [][]int{nil, nil, {0}, {1}}},
		{name: "calls that each read the other's writes run in the model's order", give: []tools.Definition{cross, swap, calc},
			want: [][]int{nil, {0}, {1}}},
		{name: "unknown tools wait for nothing", give: []tools.Definition{{}, write, {}}, want: [][]int{nil, nil, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, batch.Plan(tt.give))
		})
	}
}

// TestRunKeepsOrderAndConcurrency: calls with no waits overlap, a call
// never starts before those it waits for end, and the limit holds.
func TestRunKeepsOrderAndConcurrency(t *testing.T) {
	t.Parallel()
	deps := batch.Plan([]tools.Definition{write, read, write, read, calc, calc})
	var (
		mu       sync.Mutex
		ended    = map[int]bool{}
		running  atomic.Int32
		most     atomic.Int32
		together = make(chan struct{})
		once     sync.Once
		meet     atomic.Int32
	)
	batch.Run(deps, 3, func(i int) {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		mu.Lock()
		for _, j := range deps[i] {
			require.True(t, ended[j], "call %d started before call %d ended", i, j)
		}
		mu.Unlock()
		if i >= 4 {
			// The two independent calls meet: run one at a time, they
			// would wait here for good.
			if meet.Add(1) == 2 {
				once.Do(func() { close(together) })
			}
			select {
			case <-together:
			case <-time.After(10 * time.Second):
				t.Errorf("call %d ran alone", i)
			}
		}
		mu.Lock()
		ended[i] = true
		mu.Unlock()
	})
	require.Len(t, ended, 6)
	require.LessOrEqual(t, most.Load(), int32(3))
}
