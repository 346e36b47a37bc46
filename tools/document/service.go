package document

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/queue"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/attachment"
	"github.com/toolgate/toolgate/ent/document"
	"github.com/toolgate/toolgate/ent/documentchunk"
	"github.com/toolgate/toolgate/ent/hybrid"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/tools/embed"
)

// Index is the name of the documents' index in the hybrid search tables.
const Index = "documents"

// Queue is the River queue documents are processed on, beside the turns'.
const Queue = "documents"

// Processing bounds.
const (
	// JobTimeout bounds one attempt at processing a file (extract, chunk,
	// embed); a hostile file stops long before, at the box's limits.
	JobTimeout = 5 * time.Minute
	// MaxAttempts is how often a file whose processing failed for a reason
	// worth repeating (the embedding provider down) is tried.
	MaxAttempts = 5
	// EmbedBatch is how many passages go in one embedding request.
	EmbedBatch = 64
)

// Config is what a Service needs.
type Config struct {
	DB *db.DB
	// Embedder embeds passages and queries; nil indexes text only (and the
	// tools that need embeddings are not offered).
	Embedder embed.Embedder
	Log      *slog.Logger
	// RetryPolicy decides when a failed attempt is tried again; nil is
	// River's default (attempt^4 seconds).
	RetryPolicy river.ClientRetryPolicy
	// Queue is the job queue files are processed on; unset, DB's own. A
	// server shares one with its turns (queue.Queue.Shared).
	Queue queue.Queue
	// Box extracts each file's text in a bounded child process; nil is
	// DefaultBox (this binary's `extract` command, or a test binary that
	// calls ServeChildIfAsked).
	Box *Box
}

// Service processes uploaded files as durable jobs and searches and reads
// what they hold.
type Service struct {
	cfg    Config
	box    *Box
	client *ent.Client
	store  *hybrid.Store
	queue  queue.JobClient
	base   context.Context
	stop   context.CancelFunc
	// halted ends when Interrupt is called: the files being processed are
	// let go at once.
	halted    context.Context
	interrupt context.CancelFunc
	// wg is the sweep's (rescue.go).
	wg sync.WaitGroup
}

// New returns a Service; Open starts it processing.
func New(cfg Config) (*Service, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Queue == (queue.Queue{}) {
		cfg.Queue = cfg.DB.Queue()
	}
	box := cfg.Box
	if box == nil {
		var err error
		if box, err = DefaultBox(); err != nil {
			return nil, err
		}
	}
	base, stop := context.WithCancel(tenancy.System(context.Background()))
	s := &Service{cfg: cfg, box: box, client: cfg.DB.Client(), store: hybrid.New(cfg.DB.SQL, cfg.DB.Dialect, Index), base: base, stop: stop}
	s.halted, s.interrupt = context.WithCancel(context.Background())
	workers := cfg.Queue.Workers()
	if err := river.AddWorkerSafely(workers, &worker{s: s}); err != nil {
		stop()
		return nil, err
	}
	q, err := cfg.Queue.Client(&river.Config{
		Queues:               map[string]river.QueueConfig{Queue: {MaxWorkers: 2}},
		Workers:              workers,
		JobTimeout:           JobTimeout,
		RescueStuckJobsAfter: JobTimeout + time.Minute,
		RetryPolicy:          cfg.RetryPolicy,
		FetchCooldown:        20 * time.Millisecond,
		Logger:               cfg.Log,
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("document queue: %w", err)
	}
	s.queue = q
	return s, nil
}

// Embedder returns the embedder, nil when there is none.
func (s *Service) Embedder() embed.Embedder { return s.cfg.Embedder }

// Open starts processing, and enqueues files left PROCESSING with no job
// (an enqueue lost to a crash between commit and insert).
func (s *Service) Open(ctx context.Context) error {
	if err := s.queue.Start(s.base); err != nil {
		return fmt.Errorf("start document queue: %w", err)
	}
	s.wg.Add(1)
	go s.sweep()
	ctx = tenancy.System(ctx)
	docs, err := s.client.Document.Query().Where(document.StatusEQ(document.StatusPROCESSING)).IDs(ctx)
	if err != nil {
		return fmt.Errorf("find documents to process: %w", err)
	}
	atts, err := s.client.Attachment.Query().Where(attachment.StatusEQ(attachment.StatusPROCESSING)).IDs(ctx)
	if err != nil {
		return fmt.Errorf("find attachments to process: %w", err)
	}
	for _, id := range docs {
		if err := s.Enqueue(ctx, Ref{Document: id}); err != nil {
			return err
		}
	}
	for _, id := range atts {
		if err := s.Enqueue(ctx, Ref{Attachment: id}); err != nil {
			return err
		}
	}
	return nil
}

// Close stops processing and waits, or gives up when ctx ends. A file being
// processed stays PROCESSING; its job is tried again after a restart.
func (s *Service) Close(ctx context.Context) error {
	s.interrupt()
	s.stop()
	err := s.queue.StopAndCancel(ctx)
	s.wg.Wait()
	return err
}

// Interrupt lets go of the files being processed now, without waiting:
// their extraction children are killed, they stay PROCESSING, and their
// jobs run again when a client next starts, without counting as a failed
// attempt. A server calls it as its shutdown begins, so a file being read
// does not hold the shutdown while the turns drain on the shared queue;
// Close follows.
func (s *Service) Interrupt() { s.interrupt() }

// Ref names one file: a knowledge base's document or a conversation's
// attachment.
type Ref struct {
	Document   int `json:"document_id,omitempty"`
	Attachment int `json:"attachment_id,omitempty"`
}

// Kind names the job.
func (Ref) Kind() string { return "toolgate_document" }

// InsertOpts keeps one live job per file.
func (Ref) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		Queue:       Queue,
		MaxAttempts: MaxAttempts,
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
			rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
			rivertype.JobStateRetryable, rivertype.JobStateScheduled,
		}},
	}
}

// Enqueue adds the file's processing job.
func (s *Service) Enqueue(ctx context.Context, ref Ref) error {
	if _, err := s.queue.Insert(tenancy.System(ctx), ref, nil); err != nil {
		return fmt.Errorf("enqueue document: %w", err)
	}
	return nil
}

type worker struct {
	river.WorkerDefaults[Ref]
	s *Service
}

// Timeout bounds one attempt, whatever client the worker shares.
func (w *worker) Timeout(*river.Job[Ref]) time.Duration { return JobTimeout }

// NextRetry is the service's retry policy, whatever client the worker
// shares; the zero time is the client's.
func (w *worker) NextRetry(job *river.Job[Ref]) time.Time {
	if w.s.cfg.RetryPolicy == nil {
		return time.Time{}
	}
	return w.s.cfg.RetryPolicy.NextRetry(job.JobRow)
}

// Work processes the file; a file that cannot be read fails alone, a
// provider outage is tried again until the last attempt.
func (w *worker) Work(ctx context.Context, job *river.Job[Ref]) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(w.s.halted, cancel)()
	beat, stopBeat := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.s.heartbeat(beat, job.ID)
	}()
	defer func() { stopBeat(); <-done }()
	err := w.s.Process(ctx, job.Args)
	if err != nil && w.s.halted.Err() != nil {
		// Interrupted by a shutdown: worked again at the next start.
		return river.JobSnooze(0)
	}
	if err == nil || ctx.Err() != nil {
		return err
	}
	if job.Attempt >= job.MaxAttempts {
		w.s.fail(context.WithoutCancel(ctx), job.Args, "processing failed: "+err.Error())
		return nil
	}
	return err
}

// Process extracts, chunks, embeds and indexes one file, and marks it
// READY, or FAILED with the reason when it cannot be read. It is what the
// file's job runs, and may run again: it starts over each time.
func (s *Service) Process(ctx context.Context, ref Ref) error {
	ctx = tenancy.System(ctx)
	f, err := s.load(ctx, ref)
	if err != nil || f == nil {
		return err
	}
	mime := Detect(f.filename, f.mime, f.original)
	text := f.text
	if f.original != nil {
		// In the box: a file that loops the parser or bloats it fails
		// alone, at a bound, and is not tried again.
		text, err = s.box.Extract(ctx, mime, f.original)
		var bad *Unreadable
		if errors.As(err, &bad) {
			s.fail(ctx, ref, bad.Reason)
			return nil
		}
		if err != nil {
			return err
		}
	}
	pieces := Chunk(text)
	var vecs [][]float32
	model := ""
	if e := s.cfg.Embedder; e != nil {
		model = e.Model()
		for start := 0; start < len(pieces); start += EmbedBatch {
			batch := pieces[start:min(start+EmbedBatch, len(pieces))]
			texts := make([]string, len(batch))
			for i, p := range batch {
				texts[i] = p.Text
			}
			v, err := e.Embed(ctx, texts)
			if err != nil {
				return fmt.Errorf("embed passages: %w", err)
			}
			vecs = append(vecs, v...)
		}
	}
	if err := s.clearChunks(ctx, ref); err != nil {
		return err
	}
	creates := make([]*ent.DocumentChunkCreate, len(pieces))
	for i, p := range pieces {
		c := s.client.DocumentChunk.Create().SetOrganizationID(f.org).SetSeq(i).SetPosition(p.Position).SetText(p.Text).SetModel(model)
		if ref.Document != 0 {
			c.SetDocumentID(ref.Document)
		} else {
			c.SetAttachmentID(ref.Attachment)
		}
		creates[i] = c
	}
	entries := make([]hybrid.Entry, 0, len(pieces))
	for start := 0; start < len(creates); start += 500 {
		rows, err := s.client.DocumentChunk.CreateBulk(creates[start:min(start+500, len(creates))]...).Save(ctx)
		if err != nil {
			return fmt.Errorf("store passages: %w", err)
		}
		for i, row := range rows {
			e := hybrid.Entry{ID: int64(row.ID), Scope: f.scope, Text: row.Text}
			if vecs != nil {
				e.Vector = vecs[start+i]
			}
			entries = append(entries, e)
		}
	}
	if err := s.store.Put(ctx, entries...); err != nil {
		return err
	}
	chars := len([]rune(text))
	if ref.Document != 0 {
		err = s.client.Document.UpdateOneID(ref.Document).SetText(text).SetMimeType(mime).SetChars(chars).
			SetChunks(len(pieces)).SetStatus(document.StatusREADY).ClearError().Exec(ctx)
	} else {
		err = s.client.Attachment.UpdateOneID(ref.Attachment).SetText(text).SetMimeType(mime).SetChars(chars).
			SetChunks(len(pieces)).SetStatus(attachment.StatusREADY).ClearError().Exec(ctx)
	}
	if err != nil {
		return fmt.Errorf("mark document ready: %w", err)
	}
	return nil
}

// file is what processing reads of a document or an attachment.
type file struct {
	org                  int
	scope                string
	filename, mime, text string
	original             []byte
}

// load reads the file to process; nil when it is gone or no longer
// PROCESSING.
func (s *Service) load(ctx context.Context, ref Ref) (*file, error) {
	if ref.Document != 0 {
		d, err := s.client.Document.Get(ctx, ref.Document)
		if ent.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("load document: %w", err)
		}
		if d.Status != document.StatusPROCESSING {
			return nil, nil
		}
		return &file{org: d.OrganizationID, scope: KnowledgeScope(d.KnowledgeBaseID), filename: d.Filename, mime: d.MimeType, text: d.Text, original: d.Original}, nil
	}
	a, err := s.client.Attachment.Get(ctx, ref.Attachment)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load attachment: %w", err)
	}
	if a.Status != attachment.StatusPROCESSING {
		return nil, nil
	}
	return &file{org: a.OrganizationID, scope: ConversationScope(a.ConversationID), filename: a.Filename, mime: a.MimeType, text: a.Text, original: a.Original}, nil
}

func (s *Service) clearChunks(ctx context.Context, ref Ref) error {
	q := s.client.DocumentChunk.Query()
	if ref.Document != 0 {
		q.Where(documentchunk.DocumentID(ref.Document))
	} else {
		q.Where(documentchunk.AttachmentID(ref.Attachment))
	}
	ids, err := q.IDs(ctx)
	if err != nil {
		return fmt.Errorf("find old passages: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	old := make([]int64, len(ids))
	for i, id := range ids {
		old[i] = int64(id)
	}
	if err := s.store.Delete(ctx, old...); err != nil {
		return err
	}
	if _, err := s.client.DocumentChunk.Delete().Where(documentchunk.IDIn(ids...)).Exec(ctx); err != nil {
		return fmt.Errorf("remove old passages: %w", err)
	}
	return nil
}

// fail marks the file FAILED with reason.
func (s *Service) fail(ctx context.Context, ref Ref, reason string) {
	ctx = tenancy.System(ctx)
	if len(reason) > 1000 {
		reason = reason[:1000]
	}
	var err error
	if ref.Document != 0 {
		err = s.client.Document.UpdateOneID(ref.Document).SetStatus(document.StatusFAILED).SetError(reason).Exec(ctx)
	} else {
		err = s.client.Attachment.UpdateOneID(ref.Attachment).SetStatus(attachment.StatusFAILED).SetError(reason).Exec(ctx)
	}
	if err != nil && !ent.IsNotFound(err) {
		s.cfg.Log.Error("mark document failed", "ref", ref, "err", err)
	}
}

// KnowledgeScope is the search scope of a knowledge base's documents.
func KnowledgeScope(knowledgeBaseID int) string { return fmt.Sprintf("kb:%d", knowledgeBaseID) }

// ConversationScope is the search scope of a conversation's attachments.
func ConversationScope(conversationID int) string {
	return fmt.Sprintf("conversation:%d", conversationID)
}

// ForgetPassages takes deleted chunks' passages out of the search index
// (the index lives beside ent's tables, outside its transactions).
func (s *Service) ForgetPassages(ctx context.Context, chunkIDs ...int) error {
	ids := make([]int64, len(chunkIDs))
	for i, id := range chunkIDs {
		ids[i] = int64(id)
	}
	return s.store.Delete(ctx, ids...)
}
