package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/retry"
	"github.com/toolgate/toolgate/tools"
)

// maxResponse bounds what a resolver may answer; larger is an error.
const maxResponse = 64 << 20

type gqlResponse struct {
	Data       map[string]json.RawMessage `json:"data"`
	Errors     []gqlError                 `json:"errors"`
	Extensions struct {
		// Attempts is how many attempts the resolver's own backend
		// requests took, when more than one (the API's "attempts"
		// extension).
		Attempts int `json:"attempts"`
	} `json:"extensions"`
}

type gqlError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

// graphql runs a tool through its resolver: a POST of the tool's operation
// with the model's arguments as variables and the turn's scope token.
func (d *Dispatcher) graphql(ctx context.Context, s Scope, c Call, def tools.Definition, res *Result) {
	vars := map[string]json.RawMessage{}
	if err := json.Unmarshal(c.Arguments, &vars); err != nil {
		res.Outcome, res.Message = schematype.OutcomeRefused, "arguments must be a JSON object"
		return
	}
	// The turn's own conversation, whatever the model wrote: the scope
	// token would refuse any other.
	delete(vars, "conversationId")
	if s.ConversationRef != "" {
		ref, _ := json.Marshal(s.ConversationRef)
		vars["conversationId"] = ref
	}
	body, err := json.Marshal(map[string]any{"query": def.Operation, "variables": vars})
	if err != nil {
		res.Outcome, res.Message = schematype.OutcomeError, err.Error()
		return
	}
	key := IdempotencyKey(s.TurnID, c.ID)
	var resp gqlResponse
	n, err := d.run(ctx, def.Effect, func(ctx context.Context) error {
		if err := d.post(ctx, s.Token, key, body, &resp); err != nil {
			return err
		}
		return transient(resp, def.Field)
	})
	res.Attempts = n
	if err != nil {
		res.failed(err, def.Effect)
		return
	}
	// The answer came on the last attempt, after the tries its resolver
	// made of its own backend.
	res.Attempts += max(resp.Extensions.Attempts, 1) - 1
	value, ok := resp.Data[def.Field]
	if len(resp.Errors) > 0 && (!ok || string(value) == "null") {
		msgs := make([]string, len(resp.Errors))
		codes := map[string]bool{}
		refused := true
		for i, e := range resp.Errors {
			msgs[i] = e.Message
			refused = refused && refusalCodes[e.code()]
			codes[e.code()] = true
		}
		res.Outcome, res.Message = schematype.OutcomeError, strings.Join(msgs, "; ")
		switch {
		case refused:
			// The resolver refused what was asked (BAD_USER_INPUT, an id
			// not found): nothing ran.
			res.Outcome = schematype.OutcomeRefused
		case len(codes) == 1 && codes[outageCode]:
			// Its backend could not be reached, after the resolver's own
			// retries: it never ran, and another attempt here would only
			// repeat them.
			res.Outcome = schematype.OutcomeOutage
		case len(codes) == 1 && codes[absenceCode]:
			// It ran and found nothing; what it said is the result.
			res.Outcome, res.Kind, res.Content = schematype.OutcomeAbsence, schematype.KindText, []byte(res.Message)
		}
		return
	}
	res.Outcome = schematype.OutcomeHits
	res.setJSON(value)
	if def.Media {
		res.setMedia()
	}
}

// refusalCodes are the error codes of a resolver that refused a request
// before running anything. Any other code is an ERROR: RUN_FAILED, say,
// is code that ran and threw or hit a bound.
var refusalCodes = map[string]bool{"BAD_USER_INPUT": true, "NOT_FOUND": true, "FORBIDDEN": true}

// The error codes of a resolver that ran nothing because its backend was
// down (after its own retries), and of one that ran and found nothing.
const (
	outageCode  = "OUTAGE"
	absenceCode = "ABSENCE"
)

// transientCodes are the error codes of a resolver that failed in a way
// that tends to pass (a busy database, a deadline): retried by the call's
// effect like a 503.
var transientCodes = map[string]bool{"INTERNAL": true, "TIMEOUT": true}

func (e gqlError) code() string {
	c, _ := e.Extensions["code"].(string)
	return c
}

// transient reports an answer whose field failed only with transient
// errors as a failure worth retrying by effect. The resolver answered, so
// the failure is Answered: its transaction kept nothing.
func transient(resp gqlResponse, field string) error {
	value, ok := resp.Data[field]
	if len(resp.Errors) == 0 || ok && string(value) != "null" {
		return nil
	}
	msgs := make([]string, len(resp.Errors))
	for i, e := range resp.Errors {
		if !transientCodes[e.code()] {
			return nil
		}
		msgs[i] = e.Message
	}
	return &retry.Failure{Reached: true, Transient: true, Answered: true, Err: errors.New(strings.Join(msgs, "; "))}
}

// post sends one attempt; a failure says whether it may have reached the
// API and whether it tends to pass (a *retry.Failure).
func (d *Dispatcher) post(ctx context.Context, token, key string, body []byte, out *gqlResponse) error {
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, d.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/graphql-response+json, application/json;q=0.9")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", key)
	httpRes, err := d.HTTP.Do(req)
	if err != nil {
		if !wrote.Load() {
			return retry.NeverReached(fmt.Errorf("could not reach the tool service: %w", unwrapURL(err)))
		}
		return retry.Reached(fmt.Errorf("the tool service did not answer: %w", unwrapURL(err)), isTimeout(err) || ctx.Err() != nil, 0)
	}
	defer httpRes.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(httpRes.Body, maxResponse+1))
	if err != nil {
		return retry.Reachedf(true, "read the tool's answer: %w", err)
	}
	if len(raw) > maxResponse {
		return retry.Reachedf(false, "the tool's answer is over %d bytes", maxResponse)
	}
	switch httpRes.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return retry.Reached(fmt.Errorf("%w: %s", errStatus, httpRes.Status), true, retry.After(httpRes.Header))
	}
	*out = gqlResponse{}
	if err := json.Unmarshal(raw, out); err != nil {
		return retry.Reachedf(false, "%w: %s", errStatus, httpRes.Status)
	}
	return nil
}

func unwrapURL(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && ue.Unwrap() != nil {
		return ue.Unwrap()
	}
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded)
}
