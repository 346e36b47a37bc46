package graph_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime/multipart"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/tools/document"
	"github.com/toolgate/toolgate/tools/embed"
)

// An upload has its own read limit (UploadTimeout, 10 minutes by default)
// in place of the ordinary one: a body that trickles in for longer than
// ReadTimeout is read whole, and one that stops arriving is cut off once
// UploadTimeout has passed, not before and not much after. Short limits
// stand in for the real ones.
func TestUploadReadLimit(t *testing.T) {
	t.Parallel()
	require.Equal(t, 10*time.Minute, graph.DefaultUploadTimeout)
	const (
		readTimeout   = 300 * time.Millisecond
		uploadTimeout = 2 * time.Second
	)
	d := dbtest.Open(t, dbtest.SQLite)
	svc, err := document.New(document.Config{DB: d, Embedder: embed.NewLocal()})
	require.NoError(t, err)
	require.NoError(t, svc.Open(context.Background()))
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	b := setupWith(t, d, func(c *graph.Config) {
		c.ReadTimeout = readTimeout
		c.UploadTimeout = uploadTimeout
		c.Documents = svc
	})
	kb := get(b.do(t, b.alice.Token, `mutation { createKnowledgeBase(input: {name: "Slow"}) { id } }`, nil).ok(t),
		"createKnowledgeBase", "id").(string)

	// The whole request, as a client would send it.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	ops, err := json.Marshal(map[string]any{"query": addDocument, "variables": map[string]any{"kb": kb, "file": nil}})
	require.NoError(t, err)
	require.NoError(t, mw.WriteField("operations", string(ops)))
	require.NoError(t, mw.WriteField("map", `{"0": ["variables.file"]}`))
	fw, err := mw.CreateFormFile("0", "slow.txt")
	require.NoError(t, err)
	_, err = fw.Write(bytes.Repeat([]byte("Slowly arriving policy text. "), 200))
	require.NoError(t, err)
	require.NoError(t, mw.Close())
	head := fmt.Sprintf("POST /graphql HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
		b.alice.Token, mw.FormDataContentType(), body.Len())
	addr := strings.TrimPrefix(b.srv.URL, "http://")

	// send writes the headers and the body in chunks, pausing between them,
	// stopping after upTo bytes of the body; it returns the response the
	// server wrote (empty if it only closed) and when it came.
	send := func(t *testing.T, upTo int, pause time.Duration) (string, time.Duration) {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		start := time.Now()
		_, err = conn.Write([]byte(head))
		require.NoError(t, err)
		data := body.Bytes()[:upTo]
		const chunks = 8
		for i := range chunks {
			part := data[i*len(data)/chunks : (i+1)*len(data)/chunks]
			_, err := conn.Write(part)
			require.NoError(t, err)
			time.Sleep(pause)
		}
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(uploadTimeout+15*time.Second)))
		var got strings.Builder
		r := bufio.NewReader(conn)
		for {
			line, err := r.ReadString('\n')
			got.WriteString(line)
			if err != nil {
				var ne net.Error
				require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server held the connection: %q", got.String())
				break
			}
		}
		return got.String(), time.Since(start)
	}

	t.Run("slower than the ordinary limit, within the upload's", func(t *testing.T) {
		got, took := send(t, body.Len(), 150*time.Millisecond)
		require.Greater(t, took, 3*readTimeout, "the body arrived over more than the ordinary limit")
		require.Contains(t, got, "200 OK")
		require.Contains(t, got, `"mimeType":"text/plain"`, got)
	})
	t.Run("a body that stops arriving", func(t *testing.T) {
		got, took := send(t, body.Len()/2, 10*time.Millisecond)
		require.GreaterOrEqual(t, took, uploadTimeout, "cut off before the upload's limit: %q", got)
		require.Less(t, took, uploadTimeout+10*time.Second, "held well past the upload's limit")
		require.Contains(t, got, `"errors"`, "the cut request is answered with an error")
		require.NotContains(t, got, `"addDocument"`)
		require.Equal(t, 1, b.client.Document.Query().CountX(tenancy.System(context.Background())), "only the whole upload made a document")
	})
}
