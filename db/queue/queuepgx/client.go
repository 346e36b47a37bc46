package queuepgx

import (
	"cmp"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"
)

// Client is a River client on PostgreSQL whose every inserted job
// is fetched at once. River notifies its producers of an insert in the
// inserting transaction, but at most once per queue per FetchCooldown:
// a job inserted right after another is told of by no one, and waits for
// the next poll (a minute, the queue's ListenPoll) if the fetch the first woke took
// its snapshot before the second committed. The same happens to a job a
// duplicate insert of it locked while a fetch passed over it. So after
// such an insert, committed, the queue is notified again; the producer
// debounces what it hears, so this costs a fetch at most, and only in
// bursts.
type Client struct {
	*river.Client[pgx.Tx]
	exec     riverdriver.Executor
	cooldown time.Duration

	mu   sync.Mutex
	sent map[string]time.Time // each queue's last insert
}

// NewClient makes a River client over pool, with cfg.
func NewClient(pool *pgxpool.Pool, cfg *river.Config) (*Client, error) {
	drv := New(pool)
	client, err := river.NewClient(drv, cfg)
	if err != nil {
		return nil, err
	}
	return &Client{Client: client, exec: drv.GetExecutor(), cooldown: cmp.Or(cfg.FetchCooldown, river.FetchCooldownDefault), sent: map[string]time.Time{}}, nil
}

// Insert enqueues a job outside any transaction and makes sure its queue
// hears of it.
func (c *Client) Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	now := time.Now()
	res, err := c.Client.Insert(ctx, args, opts)
	if err != nil || res.Job.State != rivertype.JobStateAvailable {
		return res, err
	}
	queue := res.Job.Queue
	c.mu.Lock()
	// River surely notified if its last notification, no later than the
	// last insert (give or take the moment between the two clocks read),
	// is older than the cooldown; otherwise it may not have.
	quiet := now.Sub(c.sent[queue]) > c.cooldown+5*time.Millisecond
	c.sent[queue] = now
	c.mu.Unlock()
	if quiet && !res.UniqueSkippedAsDuplicate {
		return res, nil
	}
	payload, _ := json.Marshal(struct {
		Queue string `json:"queue"`
	}{queue})
	// The job is in whatever this says: unheard, it is found by the poll.
	_ = c.exec.NotifyMany(context.WithoutCancel(ctx), &riverdriver.NotifyManyParams{Payload: []string{string(payload)}, Topic: insertTopic})
	return res, nil
}

// insertTopic is the channel River's producers listen on for inserts.
const insertTopic = "river_insert"
