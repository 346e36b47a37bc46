// Package tasks is update_tasks: the task list a conversation shows the
// person, replaced whole by each call.
package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/task"
	"github.com/toolgate/toolgate/tools"
)

// The product's limits.
const (
	// MaxTasks is the longest list.
	MaxTasks = 20
	// MaxInProgress is how many tasks may be in progress at once.
	MaxInProgress = 1
	// MaxTitleChars bounds a task's title.
	MaxTitleChars = 200
)

// ErrInvalid marks an argument the model got wrong; the message says which
// limit.
var ErrInvalid = tools.Refusef("invalid task list")

// Item is one task as the model sends it.
type Item struct {
	Title  string `json:"title"`
	Status string `json:"status"`
}

// Parse reads and checks update_tasks' arguments.
func Parse(args json.RawMessage) ([]Item, error) {
	var in struct {
		Tasks *[]Item `json:"tasks"`
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if in.Tasks == nil {
		return nil, fmt.Errorf("%w: tasks is required (an empty list clears it)", ErrInvalid)
	}
	items := *in.Tasks
	if len(items) > MaxTasks {
		return nil, fmt.Errorf("%w: at most %d tasks, got %d", ErrInvalid, MaxTasks, len(items))
	}
	inProgress := 0
	for i := range items {
		it := &items[i]
		it.Title = strings.TrimSpace(it.Title)
		switch {
		case it.Title == "":
			return nil, fmt.Errorf("%w: tasks[%d]: empty title", ErrInvalid, i)
		case utf8.RuneCountInString(it.Title) > MaxTitleChars:
			return nil, fmt.Errorf("%w: tasks[%d]: title over %d characters", ErrInvalid, i, MaxTitleChars)
		}
		if err := task.StatusValidator(task.Status(it.Status)); err != nil {
			return nil, fmt.Errorf("%w: tasks[%d]: status %q: want pending, in_progress or done", ErrInvalid, i, it.Status)
		}
		if task.Status(it.Status) == task.StatusInProgress {
			inProgress++
		}
	}
	if inProgress > MaxInProgress {
		return nil, fmt.Errorf("%w: at most %d task in_progress, got %d", ErrInvalid, MaxInProgress, inProgress)
	}
	return items, nil
}

// Apply replaces the conversation's task list with the one in args and
// returns the acknowledgement the model hears. It runs in a transaction of
// its own, or in client's when client is transactional. Client is not
// scoped: the runtime calls it inside the turn, for the turn's
// conversation.
func Apply(ctx context.Context, client *ent.Client, conversationID int, args json.RawMessage) (json.RawMessage, error) {
	items, err := Parse(args)
	if err != nil {
		return nil, err
	}
	tx, err := client.Tx(ctx)
	switch {
	case errors.Is(err, ent.ErrTxStarted):
		if err := replace(ctx, client, conversationID, items); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("begin: %w", err)
	default:
		if err := replace(ctx, tx.Client(), conversationID, items); err != nil {
			return nil, errors.Join(err, tx.Rollback())
		}
		if err := tx.Commit(); err != nil {
			return nil, fmt.Errorf("commit tasks: %w", err)
		}
	}
	return json.Marshal(struct {
		OK    bool `json:"ok"`
		Saved int  `json:"saved"`
	}{true, len(items)})
}

func replace(ctx context.Context, client *ent.Client, conversationID int, items []Item) error {
	if _, err := client.Task.Delete().Where(task.ConversationID(conversationID)).Exec(ctx); err != nil {
		return fmt.Errorf("clear tasks: %w", err)
	}
	if len(items) == 0 {
		return nil
	}
	creates := make([]*ent.TaskCreate, len(items))
	for i, it := range items {
		creates[i] = client.Task.Create().
			SetConversationID(conversationID).
			SetPosition(i).
			SetTitle(it.Title).
			SetStatus(task.Status(it.Status))
	}
	if err := client.Task.CreateBulk(creates...).Exec(ctx); err != nil {
		return fmt.Errorf("save tasks: %w", err)
	}
	return nil
}

// List returns the conversation's tasks in list order: title and status.
func List(ctx context.Context, client *ent.Client, conversationID int) ([]*ent.Task, error) {
	ts, err := client.Task.Query().
		Where(task.ConversationID(conversationID)).
		Order(ent.Asc(task.FieldPosition)).
		Select(task.FieldTitle, task.FieldStatus).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return ts, nil
}
