package graph

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"entgo.io/ent/dialect"
	"github.com/99designs/gqlgen/graphql"
	"golang.org/x/time/rate"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/graph/model"
)

// Rate limits: how fast one person may call, counted over all their
// tokens and sign-ins together (a new token gains nothing), with the
// organisation's own numbers or the server's defaults. A turn's scope
// token is not counted: its calls are bounded by the turn, and refusing
// them would fail the turn, not slow its person.
//
// Requests a second are counted where the database says: on SQLite, one
// process serves, and a token bucket in memory per person
// (golang.org/x/time/rate) costs nothing per request; on PostgreSQL
// replicas share the count in one UNLOGGED table, one fixed one-second
// window per person (a bucket per replica would let N replicas give N
// times the rate). A person's first request of a second on a replica is
// counted in memory; from the second on, each adds what the replica
// counted to the shared window and reads the total, so a person's turn
// (one request, then the turn's own scope-token calls, never counted)
// costs no statement here, and the rate is overshot by at most one
// request a second for each replica. Turns at once are counted from
// the database on both (RUNNING turns of the person's conversations).

// Defaults of the rate limits `toolgate serve` starts with (a Server's
// Config without them limits nothing); organisations set their own with
// setRateLimits.
const (
	// DefaultRequestsPerSecond is how many requests a second one person
	// may make.
	DefaultRequestsPerSecond = 20
	// DefaultTurnsAtOnce is how many turns one person may have running.
	DefaultTurnsAtOnce = 5
)

// Bounds of an organisation's own limits.
const (
	maxRequestsPerSecond = 10_000
	maxTurnsAtOnce       = 1_000
)

// RateLimitedError is a call past a rate limit.
type RateLimitedError struct {
	// What was exceeded, in words.
	What string
	// RetryAfter is when to try again.
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string { return e.What }

// retryAfterSeconds is Retry-After's value: whole seconds, at least one.
func (e *RateLimitedError) retryAfterSeconds() int {
	return max(1, int(math.Ceil(e.RetryAfter.Seconds())))
}

// limits holds the server's rate limits and counts.
type limits struct {
	client      *ent.Client
	log         *slog.Logger
	rps, turns  int // the server's defaults
	counter     requestCounter
	present     func(context.Context, error) []byte
	orgsMu      sync.Mutex
	orgs        map[int]orgLimits
	orgsFetched map[int]time.Time
}

// orgLimits are an organisation's own limits; 0 is the default.
type orgLimits struct{ rps, turns int }

// orgLimitsTTL is how long an organisation's limits are kept in memory: a
// change reaches the other replicas within it.
const orgLimitsTTL = 10 * time.Second

func newLimits(client *ent.Client, log *slog.Logger, dialectName string, sqlDB *sql.DB, rps, turns int) *limits {
	l := &limits{client: client, log: log, rps: max(rps, 0), turns: max(turns, 0),
		orgs: map[int]orgLimits{}, orgsFetched: map[int]time.Time{}}
	if dialectName == dialect.Postgres && sqlDB != nil {
		l.counter = &sharedCounter{db: sqlDB}
	} else {
		l.counter = &localCounter{buckets: map[int]*bucket{}}
	}
	return l
}

// effective returns the organisation's limits, its own or the defaults
// (0: no limit), and whether each is the default.
func (l *limits) effective(ctx context.Context, orgID int) (rps, turns int, rpsDefault, turnsDefault bool, err error) {
	o, err := l.org(ctx, orgID)
	if err != nil {
		return 0, 0, false, false, err
	}
	rps, rpsDefault = o.rps, o.rps == 0
	if rpsDefault {
		rps = l.rps
	}
	turns, turnsDefault = o.turns, o.turns == 0
	if turnsDefault {
		turns = l.turns
	}
	return rps, turns, rpsDefault, turnsDefault, nil
}

func (l *limits) org(ctx context.Context, orgID int) (orgLimits, error) {
	now := time.Now()
	l.orgsMu.Lock()
	if at, ok := l.orgsFetched[orgID]; ok && now.Sub(at) < orgLimitsTTL {
		o := l.orgs[orgID]
		l.orgsMu.Unlock()
		return o, nil
	}
	l.orgsMu.Unlock()
	org, err := l.client.Organization.Get(tenancy.System(ctx), orgID)
	if err != nil {
		return orgLimits{}, fmt.Errorf("load rate limits: %w", err)
	}
	var o orgLimits
	if org.RateRequestsPerSecond != nil {
		o.rps = *org.RateRequestsPerSecond
	}
	if org.RateTurnsAtOnce != nil {
		o.turns = *org.RateTurnsAtOnce
	}
	l.orgsMu.Lock()
	if len(l.orgs) > 10_000 {
		clear(l.orgs)
		clear(l.orgsFetched)
	}
	l.orgs[orgID], l.orgsFetched[orgID] = o, now
	l.orgsMu.Unlock()
	return o, nil
}

// forget drops an organisation's kept limits, after they changed.
func (l *limits) forget(orgID int) {
	l.orgsMu.Lock()
	delete(l.orgsFetched, orgID)
	l.orgsMu.Unlock()
}

// middleware counts each request of a person against their requests a
// second, once their token is accepted and before anything of the body is
// read; past it, 429 with Retry-After. It also turns a response whose
// operation was refused by a limit (turns at once) into a 429.
func (l *limits) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		v, err := auth.FromContext(ctx)
		if err != nil || v.Scoped() {
			next.ServeHTTP(w, r)
			return
		}
		rps, _, _, _, err := l.effective(ctx, v.OrganizationID)
		if err == nil && rps > 0 {
			var wait time.Duration
			wait, err = l.counter.take(ctx, v.UserID, rps)
			if err == nil && wait > 0 {
				l.refuse(w, r, &RateLimitedError{
					What:       fmt.Sprintf("rate limited: over %d requests a second; try again after Retry-After", rps),
					RetryAfter: wait,
				})
				return
			}
		}
		if err != nil && ctx.Err() == nil {
			// The count is out of reach: the request is served rather
			// than refused; a limit protects, it does not gate.
			l.log.WarnContext(ctx, "rate limit unavailable", "err", err)
		}
		note := &limitNote{}
		next.ServeHTTP(&limitWriter{ResponseWriter: w, note: note}, r.WithContext(context.WithValue(ctx, limitNoteKey{}, note)))
	})
}

func (l *limits) refuse(w http.ResponseWriter, r *http.Request, e *RateLimitedError) {
	w.Header().Set("Retry-After", strconv.Itoa(e.retryAfterSeconds()))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(l.present(r.Context(), e))
}

// turnFields are the root fields that set a turn running.
var turnFields = map[string]bool{"sendMessage": true, "answerClarification": true}

// turnsAtOnce refuses a root field that would set one more of the
// person's turns running past their limit. Two sends at the same instant
// may both pass: the count is read, not reserved.
func (l *limits) turnsAtOnce(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	fc := graphql.GetRootFieldContext(ctx)
	if fc == nil || !turnFields[fc.Field.Name] {
		return next(ctx)
	}
	v, err := auth.FromContext(ctx)
	if err != nil || v.Scoped() {
		return next(ctx)
	}
	_, turns, _, _, err := l.effective(ctx, v.OrganizationID)
	if err != nil {
		graphql.AddError(ctx, err)
		return graphql.Null
	}
	if turns == 0 {
		return next(ctx)
	}
	if fc.Field.Name == "sendMessage" {
		// sendMessage counts the person's running turns with its own read
		// of the conversation's turns (turnsOf): no statement more.
		return next(context.WithValue(ctx, turnsLimitKey{}, turnsLimit{userID: v.UserID, most: turns}))
	}
	running, err := l.client.Turn.Query().
		Where(turn.StatusEQ(turn.StatusRUNNING), turn.HasConversationWith(conversation.UserID(v.UserID))).
		Count(tenancy.System(ctx))
	if err != nil {
		graphql.AddError(ctx, fmt.Errorf("count running turns: %w", err))
		return graphql.Null
	}
	if err := tooManyTurns(running, turns); err != nil {
		graphql.AddError(ctx, err)
		return graphql.Null
	}
	return next(ctx)
}

// turnsLimit is the turns-at-once limit a sendMessage applies itself: the
// caller, and how many of their turns may run at once.
type turnsLimit struct{ userID, most int }

type turnsLimitKey struct{}

// turnsLimitOf is the limit turnsAtOnce left for ctx's sendMessage; most
// is 0 without one.
func turnsLimitOf(ctx context.Context) turnsLimit {
	l, _ := ctx.Value(turnsLimitKey{}).(turnsLimit)
	return l
}

// tooManyTurns refuses one more turn when running turns reach the limit.
func tooManyTurns(running, most int) error {
	if most > 0 && running >= most {
		return &RateLimitedError{
			What:       fmt.Sprintf("rate limited: %d of your turns are running, at most %d at once; wait for one to finish", running, most),
			RetryAfter: 5 * time.Second,
		}
	}
	return nil
}

// limitNote is set when an operation of the request was refused by a
// limit, so the HTTP answer is a 429.
type limitNote struct {
	retryAfter atomic.Int64 // seconds; 0: not refused
}

type limitNoteKey struct{}

// noteLimited marks the request of ctx as refused by a limit.
func noteLimited(ctx context.Context, e *RateLimitedError) {
	if n, ok := ctx.Value(limitNoteKey{}).(*limitNote); ok {
		n.retryAfter.Store(int64(e.retryAfterSeconds()))
	}
}

// limitWriter answers 429 with Retry-After in place of 200 when the note
// says a limit refused the operation.
type limitWriter struct {
	http.ResponseWriter
	note  *limitNote
	wrote bool
}

func (w *limitWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if s := w.note.retryAfter.Load(); s > 0 && code == http.StatusOK {
			w.Header().Set("Retry-After", strconv.FormatInt(s, 10))
			code = http.StatusTooManyRequests
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *limitWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *limitWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestCounter counts a person's requests: take returns 0 when the
// request may go on, else how long until it could.
type requestCounter interface {
	take(ctx context.Context, userID, perSecond int) (time.Duration, error)
}

// localCounter is a token bucket a person in this process: a second's
// worth of requests at once, refilled at the rate.
type localCounter struct {
	mu      sync.Mutex
	buckets map[int]*bucket
}

type bucket struct {
	limit int
	l     *rate.Limiter
}

func (c *localCounter) take(_ context.Context, userID, perSecond int) (time.Duration, error) {
	now := time.Now()
	c.mu.Lock()
	b := c.buckets[userID]
	if b == nil || b.limit != perSecond {
		if len(c.buckets) >= 100_000 {
			// Full buckets are people who have not called for a second:
			// forgetting them changes nothing.
			for id, old := range c.buckets {
				if old.l.TokensAt(now) >= float64(old.limit) {
					delete(c.buckets, id)
				}
			}
		}
		b = &bucket{limit: perSecond, l: rate.NewLimiter(rate.Limit(perSecond), perSecond)}
		c.buckets[userID] = b
	}
	c.mu.Unlock()
	res := b.l.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d, nil
	}
	return 0, nil
}

// sharedCounter counts in PostgreSQL, shared by every replica: one row a
// person and second, incremented by one upsert that returns the count.
// The table is UNLOGGED (no write-ahead log: a crash empties it, which
// only forgets a second of counts) and created at first use; rows older
// than a minute are deleted every minute by whichever replica counts then.
type sharedCounter struct {
	db      *sql.DB
	once    sync.Mutex
	created bool
	swept   atomic.Int64 // unix seconds of the last sweep

	mu sync.Mutex
	// unsent are the requests of each person counted here and not yet in
	// the shared window, in the second they were made.
	unsent map[int]unsent
}

// unsent is a person's requests of one second not yet in the shared window.
type unsent struct {
	second int64
	hits   int
	// shared: the replica has written to the second's window already.
	shared bool
}

// deferred counts a request in memory and reports true when it is the
// person's first of the second here; otherwise it returns how many to add
// to the shared window (this one included).
func (c *sharedCounter) deferred(userID int, second int64) (bool, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unsent == nil {
		c.unsent = map[int]unsent{}
	}
	u := c.unsent[userID]
	if u.second != second {
		if len(c.unsent) >= 10_000 {
			for id, old := range c.unsent {
				if old.second < second {
					delete(c.unsent, id)
				}
			}
		}
		u = unsent{second: second}
	}
	u.hits++
	if !u.shared && u.hits == 1 {
		c.unsent[userID] = u
		return true, 0
	}
	add := u.hits
	u.hits, u.shared = 0, true
	c.unsent[userID] = u
	return false, add
}

const rateTable = "toolgate_rate_windows"

func (c *sharedCounter) ensure(ctx context.Context) error {
	c.once.Lock()
	defer c.once.Unlock()
	if c.created {
		return nil
	}
	if _, err := c.db.ExecContext(ctx, `CREATE UNLOGGED TABLE IF NOT EXISTS `+rateTable+` (
		user_id bigint NOT NULL, second bigint NOT NULL, hits integer NOT NULL,
		PRIMARY KEY (user_id, second))`); err != nil {
		var exists bool
		// Two replicas creating it at once: one wins, the other's
		// statement fails on the catalogue's unique index.
		if qerr := c.db.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, rateTable).Scan(&exists); qerr != nil || !exists {
			return fmt.Errorf("create %s: %w", rateTable, err)
		}
	}
	c.created = true
	return nil
}

func (c *sharedCounter) take(ctx context.Context, userID, perSecond int) (time.Duration, error) {
	if err := c.ensure(ctx); err != nil {
		return 0, err
	}
	now := time.Now()
	second := now.Unix()
	first, add := c.deferred(userID, second)
	if first {
		return 0, nil
	}
	var hits int
	err := c.db.QueryRowContext(ctx, `INSERT INTO `+rateTable+` (user_id, second, hits) VALUES ($1, $2, $3)
		ON CONFLICT (user_id, second) DO UPDATE SET hits = `+rateTable+`.hits + EXCLUDED.hits RETURNING hits`, userID, second, add).Scan(&hits)
	if err != nil {
		return 0, fmt.Errorf("count request: %w", err)
	}
	if last := c.swept.Load(); second-last >= 60 && c.swept.CompareAndSwap(last, second) {
		// A sweep that fails is tried again by the next minute's.
		_, _ = c.db.ExecContext(ctx, `DELETE FROM `+rateTable+` WHERE second < $1`, second-60)
	}
	if hits > perSecond {
		return time.Unix(second+1, 0).Sub(now), nil
	}
	return 0, nil
}

// rateLimitsOf answers Organization.rateLimits from the row read (within
// setRateLimits' transaction, the row it wrote).
func (l *limits) rateLimitsOf(org *ent.Organization) *model.RateLimits {
	r := &model.RateLimits{RequestsPerSecond: l.rps, TurnsAtOnce: l.turns, RequestsPerSecondDefault: true, TurnsAtOnceDefault: true}
	if org.RateRequestsPerSecond != nil {
		r.RequestsPerSecond, r.RequestsPerSecondDefault = *org.RateRequestsPerSecond, false
	}
	if org.RateTurnsAtOnce != nil {
		r.TurnsAtOnce, r.TurnsAtOnceDefault = *org.RateTurnsAtOnce, false
	}
	return r
}

// setRateLimits changes the caller's organisation's limits; admins only.
func (r *Resolver) setRateLimits(ctx context.Context, in model.SetRateLimitsInput) (*ent.Organization, error) {
	v, err := auth.FromContext(ctx)
	if err != nil {
		return nil, err
	}
	if v.Scoped() || !v.Admin {
		return nil, auth.ErrForbidden
	}
	upd := r.client(ctx).Organization.UpdateOneID(v.OrganizationID)
	switch n := in.RequestsPerSecond; {
	case n == nil:
	case *n == 0:
		upd.ClearRateRequestsPerSecond()
	case *n < 0 || *n > maxRequestsPerSecond:
		return nil, inputErrorf("requestsPerSecond is %d: 1 to %d, or 0 for the server's default", *n, maxRequestsPerSecond)
	default:
		upd.SetRateRequestsPerSecond(*n)
	}
	switch n := in.TurnsAtOnce; {
	case n == nil:
	case *n == 0:
		upd.ClearRateTurnsAtOnce()
	case *n < 0 || *n > maxTurnsAtOnce:
		return nil, inputErrorf("turnsAtOnce is %d: 1 to %d, or 0 for the server's default", *n, maxTurnsAtOnce)
	default:
		upd.SetRateTurnsAtOnce(*n)
	}
	org, err := upd.Save(ctx)
	if err != nil {
		return nil, err
	}
	if l := r.limits; l != nil {
		l.forget(v.OrganizationID)
		if tx := ent.TxFromContext(ctx); tx != nil {
			// And once committed: a read between the two kept the old.
			tx.OnCommit(func(next ent.Committer) ent.Committer {
				return ent.CommitFunc(func(ctx context.Context, tx *ent.Tx) error {
					err := next.Commit(ctx, tx)
					l.forget(v.OrganizationID)
					return err
				})
			})
		}
	}
	return org, nil
}
