package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
)

// The fake model's streamed answers, chunk for chunk those of toolgate's own
// end-to-end statement test: a call whose last message is not a tool result
// asks for one calculator call; the next, which carries its result, answers.
const (
	callChunk   = `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"finish_reason":"tool_calls","delta":{"role":"assistant","tool_calls":[{"index":0,"id":"c0","type":"function","function":{"name":"calculator","arguments":"{\"expression\":\"1+1\"}"}}]}}]}` + "\n\n"
	answerChunk = `data: {"id":"y","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"finish_reason":"stop","delta":{"role":"assistant","content":"It is 2."}}]}` + "\n\n"
	usageChunk  = `data: {"id":"y","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":3,"total_tokens":103}}` + "\n\n"
	doneChunk   = "data: [DONE]\n\n"
)

// answer is the fake model's text, which both sides' turns must end with.
const answer = "It is 2."

// modelStats is what the fake model has answered so far.
type modelStats struct {
	Requests int64 `json:"requests"`
	Bytes    int64 `json:"bytes"`
	Refused  int64 `json:"refused"`
}

// fakeModel answers Chat Completions at once, streamed, and counts the
// requests and their bytes (GET /stats), so the bench can check that each
// turn made exactly its two model calls and compare the prompts' sizes.
type fakeModel struct {
	requests, bytes, refused atomic.Int64
}

func (m *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/stats" {
		_ = json.NewEncoder(w).Encode(modelStats{Requests: m.requests.Load(), Bytes: m.bytes.Load(), Refused: m.refused.Load()})
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req struct {
		Stream   bool
		Messages []struct{ Role string }
	}
	if err := json.Unmarshal(body, &req); err != nil || !req.Stream || len(req.Messages) == 0 {
		// Both sides are meant to stream; anything else is a bench bug.
		m.refused.Add(1)
		http.Error(w, "the fake model answers streamed chat completions only", http.StatusBadRequest)
		return
	}
	m.requests.Add(1)
	m.bytes.Add(int64(len(body)))
	w.Header().Set("Content-Type", "text/event-stream")
	if req.Messages[len(req.Messages)-1].Role == "tool" {
		_, _ = io.WriteString(w, answerChunk)
	} else {
		_, _ = io.WriteString(w, callChunk)
	}
	_, _ = io.WriteString(w, usageChunk+doneChunk)
}

// serveFakeModel serves the fake model on a loopback port until the process
// is ended, and prints its base URL first: the bench runs it as a child
// process so that its CPU is neither toolgate's nor Eino's.
func serveFakeModel() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Fprintf(os.Stdout, "http://%s\n", l.Addr())
	return http.Serve(l, &fakeModel{})
}
