package graph_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/console"
	"github.com/toolgate/toolgate/graph/gid"
)

// BenchmarkPortalTranscript reads a conversation of 100 turns × 5 tool
// calls with their results' metadata through the admin console's own
// transcript query, served in process (no network, nothing decoded, the
// body counted, not kept), so ns/op and B/op are the server's cost of one
// read: resolving, SQL through the driver and encoding the answer;
// cpu-ms/op is the process's CPU time per read.
func BenchmarkPortalTranscript(b *testing.B) {
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		b.Run(string(backend), func(b *testing.B) {
			tb, counter, conv := longConversation(b, backend, 100, 5)
			body, err := json.Marshal(map[string]any{"query": console.Operations()["transcript"], "variables": map[string]any{"id": conv, "first": 100}})
			require.NoError(b, err)
			srv := graph.NewServer(graph.Config{DB: tb.db})
			read := func(w http.ResponseWriter) {
				req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tb.alice.Token)
				srv.ServeHTTP(w, req)
			}
			first := httptest.NewRecorder()
			read(first)
			require.Equal(b, http.StatusOK, first.Code, first.Body.String())
			require.NotContains(b, first.Body.String(), `"errors"`)
			counter.Reset()
			b.ReportAllocs()
			cpu := cpuTime(b)
			for b.Loop() {
				read(&countingWriter{header: http.Header{}})
			}
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(len(counter.Statements()))/float64(b.N), "stmts/op")
			b.ReportMetric(float64(first.Body.Len()), "answer-bytes")
		})
	}
}

// transcriptShapes are the reads a portal writes of a 100-turn
// conversation, beside the console's own: no orderBy, the latest page
// (last: 100), one more field, fragments, backward newest first.
var transcriptShapes = []struct{ name, query string }{
	{"console", ""},
	{"no-orderBy", `query($id: ID!) { conversation(id: $id) { id title createdAt turns(first: 100) { pageInfo { hasNextPage endCursor }
	  edges { node { id number status userText answer startedAt finishedAt toolCalls { id name outcome arguments result { ref kind chars } } } } } } }`},
	{"last-100", `query($id: ID!) { conversation(id: $id) { id title turns(last: 100) { pageInfo { hasPreviousPage startCursor }
	  edges { node { id number status userText answer startedAt finishedAt toolCalls { id name outcome arguments result { ref kind chars } } } } } } }`},
	{"updatedAt", `query($id: ID!) { conversation(id: $id) { id title createdAt updatedAt turns(first: 100, orderBy: [{field: NUMBER, direction: ASC}]) {
	  edges { node { id number status userText answer toolCalls { id name outcome arguments result { ref kind chars } } } } } } }`},
	{"fragments", `query($id: ID!) { conversation(id: $id) { ...C turns(first: 100) { edges { cursor node { ...T } } } } }
	 fragment C on Conversation { id title updatedAt }
	 fragment T on Turn { id number s: status userText answer ... on Turn { toolCalls { ...TC } modelCalls { model inputTokens outputTokens } } }
	 fragment TC on ToolCall { __typename id name outcome result { id ref kind chars bytes } }`},
}

// BenchmarkTranscriptShapes reads the same 100-turn conversation as
// BenchmarkPortalTranscript in each of transcriptShapes, so that a shape
// the hot path did not serve shows as its cost.
func BenchmarkTranscriptShapes(b *testing.B) {
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		b.Run(string(backend), func(b *testing.B) {
			tb, counter, conv := longConversation(b, backend, 100, 5)
			srv := graph.NewServer(graph.Config{DB: tb.db})
			for _, shape := range transcriptShapes {
				b.Run(shape.name, func(b *testing.B) {
					q := shape.query
					if q == "" {
						q = console.Operations()["transcript"]
					}
					body, err := json.Marshal(map[string]any{"query": q, "variables": map[string]any{"id": conv, "first": 100}})
					require.NoError(b, err)
					read := func(w http.ResponseWriter) {
						req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("Authorization", "Bearer "+tb.alice.Token)
						srv.ServeHTTP(w, req)
					}
					first := httptest.NewRecorder()
					read(first)
					require.Equal(b, http.StatusOK, first.Code, first.Body.String())
					require.NotContains(b, first.Body.String(), `"errors"`)
					require.Contains(b, first.Body.String(), `"number":100`)
					counter.Reset()
					b.ReportAllocs()
					cpu := cpuTime(b)
					for b.Loop() {
						read(&countingWriter{header: http.Header{}})
					}
					b.ReportMetric(float64(cpuTime(b)-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
					b.ReportMetric(float64(len(counter.Statements()))/float64(b.N), "stmts/op")
				})
			}
		})
	}
}

// countingWriter takes a response as a server's connection does, without
// keeping it, so that B/op is the server's allocation alone.
type countingWriter struct {
	header http.Header
	n      int
}

func (w *countingWriter) Header() http.Header         { return w.header }
func (w *countingWriter) WriteHeader(int)             {}
func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// cpuTime is the CPU time this process has used, user and system: unlike
// ns/op it does not count the time a busy machine keeps the benchmark
// waiting, nor PostgreSQL's own work.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkOtherReads measures the rest of the API's reads of the same
// 100-turn conversation that the transcript's hot path does not serve (the
// resolvers answer them): the conversations list, node(id:) on a
// conversation and on a turn, the admin console's turns, and stored
// results read by ref (toolResults), each with its CPU, statements and
// allocation per request.
func BenchmarkOtherReads(b *testing.B) {
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		b.Run(string(backend), func(b *testing.B) {
			tb, counter, conv := longConversation(b, backend, 100, 5)
			convID, err := gid.Decode(conv)
			require.NoError(b, err)
			srv := graph.NewServer(graph.Config{DB: tb.db})
			post := func(w http.ResponseWriter, query string, vars map[string]any) {
				body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
				require.NoError(b, err)
				req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tb.alice.Token)
				srv.ServeHTTP(w, req)
			}
			first := httptest.NewRecorder()
			post(first, `query($id: ID!) { conversation(id: $id) { turns(first: 1) { edges { node { id } } } } }`, map[string]any{"id": conv})
			var page struct {
				Data struct {
					Conversation struct {
						Turns struct {
							Edges []struct{ Node struct{ ID string } }
						}
					}
				}
			}
			require.NoError(b, json.Unmarshal(first.Body.Bytes(), &page))
			turnID := page.Data.Conversation.Turns.Edges[0].Node.ID
			reads := []struct {
				name, query string
				vars        map[string]any
			}{
				{"conversations", `query { conversations(first: 50) { edges { cursor node { id title createdAt updatedAt turnsCount agent { id name } } } pageInfo { hasNextPage endCursor } } }`, nil},
				{"node-conversation", `query($id: ID!) { node(id: $id) { id ... on Conversation { title createdAt turnsCount user { id name } agent { id name } } } }`, map[string]any{"id": conv}},
				{"node-turn", `query($id: ID!) { node(id: $id) { id ... on Turn { number status userText answer toolCalls { id name outcome result { ref kind chars } } } } }`, map[string]any{"id": turnID}},
				{"console-turns", console.Operations()["turns"], map[string]any{"first": 50}},
				{"toolResults", `query($c: ID!, $refs: [String!]!) { toolResults(conversationId: $c, refs: $refs) { reads { ref kind text } failures { item message } } }`,
					map[string]any{"c": conv, "refs": []string{fmt.Sprintf("r-%d-1-0", convID), fmt.Sprintf("r-%d-50-2", convID), fmt.Sprintf("r-%d-100-4", convID)}}},
			}
			for _, rd := range reads {
				b.Run(rd.name, func(b *testing.B) {
					first := httptest.NewRecorder()
					post(first, rd.query, rd.vars)
					require.Equal(b, http.StatusOK, first.Code, first.Body.String())
					require.NotContains(b, first.Body.String(), `"errors"`)
					counter.Reset()
					b.ReportAllocs()
					cpu := cpuTime(b)
					for b.Loop() {
						post(&countingWriter{header: http.Header{}}, rd.query, rd.vars)
					}
					b.ReportMetric(float64(cpuTime(b)-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
					b.ReportMetric(float64(len(counter.Statements()))/float64(b.N), "stmts/op")
					b.ReportMetric(float64(first.Body.Len()), "answer-bytes")
				})
			}
		})
	}
}
