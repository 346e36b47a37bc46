package loop_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/model"
)

// heardPrompts answers every call at once and keeps what each was sent.
type heardPrompts struct {
	mu   sync.Mutex
	sent []string
}

func (p *heardPrompts) Name() string { return "heard" }

func (p *heardPrompts) Complete(_ context.Context, req model.Request) (*model.Response, error) {
	var b strings.Builder
	for _, m := range req.Messages {
		b.WriteString(m.Text)
		b.WriteString("\n")
	}
	p.mu.Lock()
	p.sent = append(p.sent, b.String())
	n := len(p.sent)
	p.mu.Unlock()
	return &model.Response{Model: "gpt-4.1", Text: "answer number " + string(rune('0'+n))}, nil
}

// TestSupersededTurnIsNotReplayed: a turn answered again (regenerateTurn
// marks the earlier one superseded) leaves the earlier turn out of the
// prompt: the model hears the question once, and not the answer it
// replaced; on both databases.
func TestSupersededTurnIsNotReplayed(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &heardPrompts{}
		h := newHarness(t, d, p)
		ctx := tenancy.System(context.Background())
		convID, err := gid.Decode(h.conversation(t))
		require.NoError(t, err)
		run := func(number int, text string) int {
			id := h.client.Turn.Create().SetConversationID(convID).SetNumber(number).SetUserText(text).SetStartedAt(h.now).SaveX(ctx).ID
			require.NoError(t, h.runner.RunTurn(ctx, id))
			require.Equal(t, "COMPLETED", string(h.client.Turn.GetX(ctx, id).Status))
			return id
		}
		run(1, "Which planet is largest?")
		second := run(2, "Name a gas giant's moon.")
		h.client.Turn.UpdateOneID(second).SetSuperseded(true).ExecX(ctx)
		run(3, "Name a gas giant's moon.")

		last := p.sent[len(p.sent)-1]
		require.Contains(t, last, "Which planet is largest?", "an earlier turn is replayed")
		require.Contains(t, last, "answer number 1")
		require.Equal(t, 1, strings.Count(last, "Name a gas giant's moon."), "the question once: %s", last)
		require.NotContains(t, last, "answer number 2", "not the answer it replaced")
	})
}
