package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// server is a `toolgate serve` child process, reached as any client reaches
// it: GraphQL over HTTP with the demo token.
type server struct {
	cmd   *exec.Cmd
	url   string
	token string
	log   string
	http  *http.Client
}

// startToolgate runs `toolgate serve --demo` in dir on the database (SQLite
// in dir when none is given), with the OpenAI provider pointed at the fake
// model. The limits per person are off: one person's back-to-back turns and
// Eino's calculate requests are the whole load.
func startToolgate(ctx context.Context, bin, dir, databaseURL, modelURL string) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	if databaseURL == "" {
		databaseURL = "sqlite://" + filepath.Join(dir, "toolgate.db")
	}
	logPath := filepath.Join(dir, "toolgate.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "serve", "--demo", "--addr", addr, "--database-url", databaseURL,
		"--model-provider", "openai", "--model", "gpt-4.1", "--embedding-provider", "none", "--browser", "none",
		"--rate-requests-per-second", "0", "--rate-turns-at-once", "0")
	cmd.Dir = dir
	cmd.Env = append(childEnv(), "OPENAI_BASE_URL="+modelURL+"/v1", "OPENAI_API_KEY=bench")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start toolgate: %w", err)
	}
	s := &server{cmd: cmd, url: "http://" + addr, log: logPath, http: &http.Client{Timeout: time.Minute}}
	if err := s.ready(ctx); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// childEnv is this process's environment without the variables toolgate
// reads, so a developer's own settings cannot change what is measured.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "TOOLGATE_") || strings.HasPrefix(name, "OPENAI_") || strings.HasPrefix(name, "ANTHROPIC_") ||
			strings.HasPrefix(name, "OTEL_") || name == "DATABASE_URL" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

var demoToken = regexp.MustCompile(`demo token: (\S+)`)

// ready waits for /readyz and the demo token in the log.
func (s *server) ready(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.cmd.ProcessState != nil {
			break
		}
		log, _ := os.ReadFile(s.log)
		if m := demoToken.FindSubmatch(log); m != nil && s.token == "" {
			s.token = string(m[1])
		}
		if s.token != "" {
			res, err := s.http.Get(s.url + "/readyz")
			if err == nil {
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					return nil
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	log, _ := os.ReadFile(s.log)
	return fmt.Errorf("toolgate did not get ready; its log:\n%s", log)
}

// stop ends the child and waits for it.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() {
		_ = s.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

func (s *server) cpu() (time.Duration, error) { return procCPU(s.cmd.Process.Pid) }

// gql posts one operation and decodes its data into out.
func (s *server) gql(ctx context.Context, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/graphql", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("new request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.token)
	res, err := s.http.Do(req)
	if err != nil {
		return fmt.Errorf("post graphql: %w", err)
	}
	defer res.Body.Close()
	var r struct {
		Data   json.RawMessage
		Errors []struct{ Message string }
	}
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
		return fmt.Errorf("decode answer (HTTP %d): %w", res.StatusCode, err)
	}
	if len(r.Errors) > 0 {
		return fmt.Errorf("graphql: %s", r.Errors[0].Message)
	}
	if err := json.Unmarshal(r.Data, out); err != nil {
		return fmt.Errorf("decode data: %w", err)
	}
	return nil
}

func (s *server) createAgent(ctx context.Context) (string, error) {
	// No optional tools: the calculator is among the tools every agent is offered.
	var out struct{ CreateAgent struct{ ID string } }
	err := s.gql(ctx, `mutation { createAgent(input: {name: "Sums", instructions: "Add.", tools: []}) { id } }`, nil, &out)
	return out.CreateAgent.ID, err
}

func (s *server) startConversation(ctx context.Context, agent string) (string, error) {
	var out struct{ StartConversation struct{ ID string } }
	err := s.gql(ctx, `mutation($a: ID!) { startConversation(input: {agentId: $a}) { id } }`, map[string]any{"a": agent}, &out)
	return out.StartConversation.ID, err
}

// calculate is toolgate's calculator as any client calls it.
func (s *server) calculate(ctx context.Context, conversation, expression string) (string, error) {
	var out struct{ Calculate struct{ Value string } }
	err := s.gql(ctx, `query($c: ID, $e: String!) { calculate(conversationId: $c, expression: $e) { value } }`,
		map[string]any{"c": conversation, "e": expression}, &out)
	return out.Calculate.Value, err
}

// turn sends the message and follows the turn's events until the stream
// ends with the turn, as a portal does; it returns the turn's id.
func (s *server) turn(ctx context.Context, conversation string) (string, error) {
	var sent struct{ SendMessage struct{ ID string } }
	if err := s.gql(ctx, `mutation($c: ID!) { sendMessage(input: {conversationId: $c, text: "1+1?"}) { id } }`,
		map[string]any{"c": conversation}, &sent); err != nil {
		return "", fmt.Errorf("send message: %w", err)
	}
	return sent.SendMessage.ID, s.follow(ctx, sent.SendMessage.ID)
}

// follow subscribes to the turn's events over Server-Sent Events and reads
// them until the stream ends with the turn, which must have answered.
func (s *server) follow(ctx context.Context, turn string) error {
	body, err := json.Marshal(map[string]any{
		"query":     `subscription($t: ID!) { turnEvents(turnId: $t) { kind turn { status answer } } }`,
		"variables": map[string]any{"t": turn},
	})
	if err != nil {
		return fmt.Errorf("encode subscription: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/graphql", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("new request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+s.token)
	res, err := s.http.Do(req)
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("subscribe: HTTP %d", res.StatusCode)
	}
	var last struct{ Status, Answer string }
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "event: complete" {
			break
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "" {
			continue
		}
		var ev struct {
			Data struct {
				TurnEvents struct {
					Turn struct {
						Status string
						Answer *string
					}
				}
			}
			Errors []struct{ Message string }
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return fmt.Errorf("decode event: %w", err)
		}
		if len(ev.Errors) > 0 {
			return fmt.Errorf("turn events: %s", ev.Errors[0].Message)
		}
		t := ev.Data.TurnEvents.Turn
		last.Status = t.Status
		if t.Answer != nil {
			last.Answer = *t.Answer
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read events: %w", err)
	}
	if last.Status != "COMPLETED" || last.Answer != answer {
		return fmt.Errorf("turn ended %s with answer %q", last.Status, last.Answer)
	}
	return nil
}

// freeAddr is a loopback address no one listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
