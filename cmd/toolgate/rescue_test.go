package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	entdoc "github.com/toolgate/toolgate/ent/document"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/tools/document/documenttest"
)

// TestKilledDocumentJobIsRescued runs the real binary: killed (SIGKILL)
// while a file is being read, the server leaves the file's job running
// in River's table. After the restart the job is taken up and finished
// within a minute (the file, a loop no check catches, fails at the CPU
// limit), not after River's own rescue past the job's 5-minute timeout,
// and no job is left running, in River's table or in the metric.
func TestKilledDocumentJobIsRescued(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		t.Run(string(backend), func(t *testing.T) {
			t.Parallel()
			killedDocumentRun(t, bin, dbtest.URL(t, backend))
		})
	}
}

func killedDocumentRun(t *testing.T, bin, url string) {
	ctx := tenancy.System(context.Background())
	s := newCrashServer(t, bin, url, "TOOLGATE_EXTRACT_CPU=60s")
	d, err := db.Open(ctx, url)
	require.NoError(t, err)
	defer d.Close()
	client := d.Client()

	s.start()
	kb, err := s.gql(`mutation { createKnowledgeBase(input: {name: "Handbook"}) { id } }`, nil)
	require.NoError(t, err)
	kbID := kb["createKnowledgeBase"].(map[string]any)["id"].(string)
	id, err := gid.Decode(s.upload(t, kbID, "extends.pdf", documenttest.ExtendsLoopPDF()))
	require.NoError(t, err)
	var children []int
	require.Eventually(t, func() bool {
		children = extractChildren(s.cmd.Process.Pid)
		return len(children) > 0
	}, 30*time.Second, 20*time.Millisecond, "no extraction child")
	time.Sleep(time.Second)
	s.kill()
	for _, pid := range children {
		_ = syscall.Kill(pid, syscall.SIGKILL) // should it outlive its parent
	}
	require.Equal(t, 1, runningJobs(t, d), "the killed process's job is left running")
	require.Equal(t, entdoc.StatusPROCESSING, client.Document.GetX(ctx, id).Status)

	s.env = []string{"TOOLGATE_EXTRACT_CPU=1s"}
	s.start()
	restarted := time.Now()
	require.Eventually(t, func() bool {
		return client.Document.GetX(ctx, id).Status != entdoc.StatusPROCESSING
	}, time.Minute, 100*time.Millisecond, "the file is still being processed a minute after the restart")
	t.Logf("the file's job finished %s after the restart", time.Since(restarted).Round(time.Millisecond))
	doc := client.Document.GetX(ctx, id)
	require.Equal(t, entdoc.StatusFAILED, doc.Status)
	require.NotNil(t, doc.Error)
	require.Contains(t, *doc.Error, "extraction exceeded its 1 s CPU limit")
	s.requireQueueIdle(t, d, restarted)
	s.stop()
}
