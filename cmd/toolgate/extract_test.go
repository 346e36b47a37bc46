package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"strings"
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

// TestExtractionBoxOfTheBinary runs the real binary: an uploaded PDF whose
// trailer's /Prev is its own table fails at once; one that loops the
// reader where no check looks is being read in a `toolgate extract` child
// when SIGTERM comes, and the server stops at once, its child with it; after
// the restart that file fails at the CPU limit, and is not tried again.
func TestExtractionBoxOfTheBinary(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		t.Run(string(backend), func(t *testing.T) {
			t.Parallel()
			extractRun(t, bin, dbtest.URL(t, backend))
		})
	}
}

func extractRun(t *testing.T, bin, url string) {
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
	add := func(name string, data []byte) int {
		t.Helper()
		id, err := gid.Decode(s.upload(t, kbID, name, data))
		require.NoError(t, err)
		return id
	}
	status := func(id int) (entdoc.Status, string) {
		doc := client.Document.GetX(ctx, id)
		if doc.Error != nil {
			return doc.Status, *doc.Error
		}
		return doc.Status, ""
	}

	prev := add("prev.pdf", documenttest.PrevLoopPDF())
	require.Eventually(t, func() bool { st, _ := status(prev); return st != entdoc.StatusPROCESSING }, 30*time.Second, 20*time.Millisecond)
	st, reason := status(prev)
	require.Equal(t, entdoc.StatusFAILED, st)
	require.Contains(t, reason, "cross-reference sections loop")

	// The loop no check knows: its child reads it, well within 60 s of CPU.
	loop := add("extends.pdf", documenttest.ExtendsLoopPDF())
	var children []int
	require.Eventually(t, func() bool {
		children = extractChildren(s.cmd.Process.Pid)
		return len(children) > 0
	}, 30*time.Second, 20*time.Millisecond, "no extraction child")
	time.Sleep(time.Second)
	require.NoError(t, syscall.Kill(children[0], 0), "the child still reads")

	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	stopped := time.Now()
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	select {
	case err := <-exited:
		require.NoError(t, err, "a clean exit")
	case <-time.After(30 * time.Second):
		s.kill()
		t.Fatal("the server did not stop on SIGTERM while a file was being read")
	}
	t.Logf("stopped %s after SIGTERM", time.Since(stopped))
	require.Less(t, time.Since(stopped), 10*time.Second)
	for _, pid := range children {
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "the extraction child outlived the server")
	}
	st, _ = status(loop)
	require.Equal(t, entdoc.StatusPROCESSING, st, "a file stopped by shutdown is read again after the restart")

	s.env = []string{"TOOLGATE_EXTRACT_CPU=1s"}
	s.start()
	require.Eventually(t, func() bool { st, _ := status(loop); return st != entdoc.StatusPROCESSING }, 60*time.Second, 50*time.Millisecond)
	st, reason = status(loop)
	require.Equal(t, entdoc.StatusFAILED, st)
	require.Contains(t, reason, "extraction exceeded its 1 s CPU limit")
	s.stop()
	var again int
	require.NoError(t, d.SQL.QueryRowContext(ctx, `SELECT COUNT(*) FROM river_job WHERE kind = 'toolgate_document' AND state <> 'completed'`).Scan(&again))
	require.Zero(t, again, "every file's job is done")
}

// upload adds a file to the knowledge base through the GraphQL multipart
// request and returns the document's id.
func (s *crashServer) upload(t *testing.T, kb, filename string, data []byte) string {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	ops, err := json.Marshal(map[string]any{
		"query":     `mutation($kb: ID!, $f: Upload) { addDocument(input: {knowledgeBaseId: $kb, file: $f}) { id status } }`,
		"variables": map[string]any{"kb": kb, "f": nil},
	})
	require.NoError(t, err)
	require.NoError(t, mw.WriteField("operations", string(ops)))
	require.NoError(t, mw.WriteField("map", `{"0": ["variables.f"]}`))
	fw, err := mw.CreateFormFile("0", filename)
	require.NoError(t, err)
	_, err = fw.Write(data)
	require.NoError(t, err)
	require.NoError(t, mw.Close())
	req, err := http.NewRequest(http.MethodPost, "http://"+s.addr+"/graphql", &body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+s.token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var out struct {
		Data struct {
			AddDocument struct{ ID, Status string }
		}
	}
	require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	require.Equal(t, "PROCESSING", out.Data.AddDocument.Status, string(raw))
	return out.Data.AddDocument.ID
}

// extractChildren are the process ids of parent's `extract` children.
func extractChildren(parent int) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so after its ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(parent) {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"); len(args) == 2 && args[1] == "extract" {
			pids = append(pids, pid)
		}
	}
	return pids
}
