package natsjs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgecount/edgecount/backoff"
)

// MaxPartitions bounds StreamConfig.Partitions: the stream lists one
// subject per partition.
const MaxPartitions = 4096

// ErrPartitionInUse is returned by EnsureStream when shrinking the partition
// count would drop a partition subject that still holds messages.
var ErrPartitionInUse = errors.New("partition still holds messages")

// StreamConfig describes the stream that carries partial sums.
type StreamConfig struct {
	// Name of the stream (default EDGECOUNT_SUMS).
	Name string
	// SubjectPrefix: partition p is published to <SubjectPrefix>.<p>
	// (default edgecount.sums).
	SubjectPrefix string
	// Partitions is the number of partitions, 1..MaxPartitions (default 16).
	// Agents and rollups must agree on it.
	Partitions int
	// Replicas is the number of copies in a cluster, 1..5 (default 1).
	Replicas int
	// MaxAge drops messages older than this even if not consumed; 0 keeps
	// them forever (default 7 days).
	MaxAge time.Duration
	// DuplicateWindow is how long the broker remembers a message id to
	// de-duplicate retried publishes (default 2 minutes). It must cover the
	// longest time an agent keeps retrying one message.
	DuplicateWindow time.Duration
	// MaxBytes bounds the stream's size (0: unbounded); the oldest
	// messages are dropped first. Set on a regional (origin) stream, whose
	// limits retention keeps everything for MaxAge: see docs/regions.md
	// for sizing it from the outage budget.
	MaxBytes int64

	// Domain, when set, makes this a region's origin stream on the
	// region's own JetStream server (a leaf node with that JetStream
	// domain): limits retention (messages stay for MaxAge whether or not
	// the hub sourced them, so a cut link loses nothing within the
	// budget), message ids prefixed with the domain (unique across
	// regions in the hub's de-duplication window), and EnsureStream also
	// creates the durable push consumer the hub sources through
	// (HubConsumer, delivering on DeliverSubject(Domain)).
	Domain string
	// Hub, when set, makes this the hub stream: it has no subjects of its
	// own and takes every message of the origin streams Hub.Sources lists
	// by durable sourcing (ADR-58). Sourced messages keep their subjects,
	// so the partition consumers read it as they read a single-broker
	// stream. Not with Domain. (A pointer keeps StreamConfig comparable.)
	Hub *Hub
}

// Hub lists the origin streams a hub stream sources.
type Hub struct {
	Sources []Source
}

// sources returns the hub's sources, none for another stream.
func (c StreamConfig) sources() []Source {
	if c.Hub == nil {
		return nil
	}
	return c.Hub.Sources
}

// Source is one region's origin stream as the hub sources it.
type Source struct {
	// Region names the region (metrics label).
	Region string
	// Domain is the region's JetStream domain.
	Domain string
	// Stream is the origin stream's name (default: the hub stream's
	// Name).
	Stream string
}

// HubConsumer names the durable push consumer on each origin stream that
// the hub's source reads.
const HubConsumer = "EDGECOUNT_HUB"

// hubHeartbeat is the idle heartbeat of the hub's source consumer: durable
// sourcing requires exactly 1 s.
const hubHeartbeat = time.Second

// hubMaxAckPending bounds the messages the origin's source consumer has in
// flight to the hub (flow control paces it further).
const hubMaxAckPending = 10000

// DeliverSubject returns the subject an origin stream's hub consumer
// delivers on: one per domain, so that the hub's sources never share
// one.
func (c StreamConfig) DeliverSubject(domain string) string {
	return c.SubjectPrefix + "-hub." + domain
}

// MsgID returns the message id a publish of id carries: id itself, or on
// an origin stream "<Domain>:<id>", so that two regions never produce the
// same id in the hub's de-duplication window.
func (c StreamConfig) MsgID(id string) string {
	if c.Domain == "" {
		return id
	}
	return c.Domain + ":" + id
}

// DefaultStreamConfig returns the default stream configuration.
func DefaultStreamConfig() StreamConfig {
	return StreamConfig{
		Name:            "EDGECOUNT_SUMS",
		SubjectPrefix:   "edgecount.sums",
		Partitions:      16,
		Replicas:        1,
		MaxAge:          7 * 24 * time.Hour,
		DuplicateWindow: 2 * time.Minute,
	}
}

// Validate reports every problem with c.
func (c StreamConfig) Validate() error {
	var errs []error
	if !validName(c.Name) {
		errs = append(errs, fmt.Errorf("stream name %q is not a valid name", c.Name))
	}
	if !validSubjectPrefix(c.SubjectPrefix) {
		errs = append(errs, fmt.Errorf("subject prefix %q is not a literal subject", c.SubjectPrefix))
	}
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		errs = append(errs, fmt.Errorf("partitions %d is out of range 1..%d", c.Partitions, MaxPartitions))
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("replicas %d is out of range 1..5", c.Replicas))
	}
	if c.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("max age %s is negative", c.MaxAge))
	}
	if c.DuplicateWindow <= 0 {
		errs = append(errs, fmt.Errorf("duplicate window %s is not positive", c.DuplicateWindow))
	} else if c.MaxAge > 0 && c.DuplicateWindow > c.MaxAge {
		errs = append(errs, fmt.Errorf("duplicate window %s is longer than max age %s", c.DuplicateWindow, c.MaxAge))
	}
	if c.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("max bytes %d is negative", c.MaxBytes))
	}
	if c.Domain != "" && !validToken(c.Domain) {
		errs = append(errs, fmt.Errorf("domain %q is not a valid domain (a subject token: no dots, wildcards or spaces)", c.Domain))
	}
	if c.Hub != nil && len(c.Hub.Sources) == 0 {
		errs = append(errs, errors.New("a hub stream needs at least one source"))
	}
	if c.Domain != "" && c.Hub != nil {
		errs = append(errs, errors.New("a stream with a domain (a region's origin) cannot also have sources (the hub)"))
	}
	domains := make(map[string]bool, len(c.sources()))
	for i, src := range c.sources() {
		if !validToken(src.Region) {
			errs = append(errs, fmt.Errorf("source %d: region %q is not a valid name", i, src.Region))
		}
		if !validToken(src.Domain) {
			errs = append(errs, fmt.Errorf("source %d: domain %q is not a valid domain (a subject token: no dots, wildcards or spaces)", i, src.Domain))
		} else if domains[src.Domain] {
			errs = append(errs, fmt.Errorf("source %d: domain %q is listed twice", i, src.Domain))
		}
		domains[src.Domain] = true
		if src.Stream != "" && !validName(src.Stream) {
			errs = append(errs, fmt.Errorf("source %d: stream name %q is not a valid name", i, src.Stream))
		}
	}
	return errors.Join(errs...)
}

// Subject returns the subject of a partition: <SubjectPrefix>.<p>, or on
// a region's origin stream <SubjectPrefix>.<Domain>.<p>. A region's
// subjects are its own so that no other region's stream captures its
// publishes over the leaf links (each origin stream would otherwise store
// every region's messages); the hub's sources map them back to
// <SubjectPrefix>.<p>.
func (c StreamConfig) Subject(partition uint32) string {
	if c.Domain != "" {
		return c.SubjectPrefix + "." + c.Domain + "." + strconv.FormatUint(uint64(partition), 10)
	}
	return c.SubjectPrefix + "." + strconv.FormatUint(uint64(partition), 10)
}

func (c StreamConfig) subjects() []string {
	s := make([]string, c.Partitions)
	for p := range s {
		s[p] = c.Subject(uint32(p))
	}
	return s
}

func (c StreamConfig) jetstream() jetstream.StreamConfig {
	sc := jetstream.StreamConfig{
		Name:        c.Name,
		Description: "edgecount partial sums, one subject per partition",
		Subjects:    c.subjects(),
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
		MaxAge:      c.MaxAge,
		Duplicates:  c.DuplicateWindow, // explicit: a sourcing stream has none by default
		Discard:     jetstream.DiscardOld,
		MaxMsgs:     -1,
		MaxBytes:    -1,
	}
	if c.MaxBytes > 0 {
		sc.MaxBytes = c.MaxBytes
	}
	switch {
	case c.Domain != "":
		// Limits retention: a work-queue origin loses messages while its
		// source is cut off (nats-server issue 3207), and the hub's
		// consumer acks do not delete here; MaxAge and MaxBytes do.
		sc.Description = "edgecount partial sums of region domain " + c.Domain + ", sourced by the hub"
		sc.Retention = jetstream.LimitsPolicy
	case c.Hub != nil:
		// No subjects: the hub stream must not capture a publish that
		// reaches it over a leaf link (the origin stores it). Work-queue
		// retention as on a single broker: the rollups' acks delete.
		sc.Description = "edgecount partial sums sourced from every region"
		sc.Subjects = nil
		for _, src := range c.Hub.Sources {
			sc.Sources = append(sc.Sources, &jetstream.StreamSource{
				Name:   cmp.Or(src.Stream, c.Name),
				Domain: src.Domain,
				SubjectTransforms: []jetstream.SubjectTransformConfig{{
					Source:      c.SubjectPrefix + "." + src.Domain + ".*",
					Destination: c.SubjectPrefix + ".{{wildcard(1)}}",
				}},
				Consumer: &jetstream.StreamConsumerSource{
					Name:           HubConsumer,
					DeliverSubject: c.DeliverSubject(src.Domain),
				},
			})
		}
	}
	return sc
}

// hubConsumer is the durable push consumer on an origin stream that the
// hub's source reads (ADR-58 durable sourcing): flow-controlled acks,
// a heartbeat of exactly 1 s.
func (c StreamConfig) hubConsumer() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        HubConsumer,
		Description:    "the hub's durable source of this region's partial sums",
		DeliverSubject: c.DeliverSubject(c.Domain),
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckFlowControlPolicy,
		FlowControl:    true,
		IdleHeartbeat:  hubHeartbeat,
		MaxAckPending:  hubMaxAckPending,
		Replicas:       c.Replicas,
	}
}

// ensureHubConsumer creates the origin's hub consumer, or updates it. The
// agent does it at start on its own regional server, so it works while the
// region is cut off from the hub.
func ensureHubConsumer(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) error {
	if cfg.Domain == "" {
		return nil
	}
	if _, err := js.CreateOrUpdatePushConsumer(ctx, cfg.Name, cfg.hubConsumer()); err != nil {
		return fmt.Errorf("cannot create the hub's source consumer %s on stream %s: %w", HubConsumer, cfg.Name, err)
	}
	return nil
}

// EnsureStream creates the stream, or updates it to cfg. It is idempotent.
// Growing the partition count adds subjects; shrinking it fails with
// ErrPartitionInUse while a dropped partition still holds messages.
// Retention and storage cannot be changed on an existing stream.
//
// A stream it creates starts at a sequence above any a stream of that name
// can have used before (see firstSeq): rows in the store remember the last
// stream sequence applied to them and skip anything at or below it, so a
// stream created again after a broker lost its state must not count from 1.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) error {
	_, err := ensureStream(ctx, js, cfg, 0)
	return err
}

// ensureStream is EnsureStream; a stream it creates starts above seen (the
// highest sequence the caller has seen). It reports whether it created the
// stream.
//
// Rollups starting together race to create the hub stream: the loser's
// create is refused (the name is taken, with another first sequence), and
// for a moment after, a lookup may not find the winner's stream yet (its
// assignment is in flight in the meta group, or its raft group has no
// leader), and a request may go unanswered. Such a step is retried, each
// request bounded by streamRequestTimeout, for up to ensureRetryFor (or
// until ctx ends): the loser re-reads the winner's stream and goes on with
// it. A broker down for longer still fails the call, as before.
func ensureStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig, seen uint64) (created bool, _ error) {
	if err := cfg.Validate(); err != nil {
		return false, fmt.Errorf("cannot ensure stream: %w", err)
	}
	giveUp := time.Now().Add(ensureRetryFor)
	for attempt := 1; ; attempt++ {
		created, err := ensureStreamOnce(ctx, js, cfg, seen)
		if err == nil || ctx.Err() != nil || !transient(err) || time.Now().After(giveUp) {
			return created, err
		}
		if !backoff.Sleep(ctx, backoff.Delay(20*time.Millisecond, time.Second, attempt)) {
			return false, err
		}
	}
}

// streamRequestTimeout bounds one request of ensureStream, and
// ensureRetryFor how long it repeats a step that failed transiently.
const (
	streamRequestTimeout = 5 * time.Second
	ensureRetryFor       = 30 * time.Second
)

// transient reports whether a failed step of ensureStream may succeed
// when repeated: the stream was not found (just created by another
// process and not visible yet), the request was not answered in time, or
// the cluster was not ready (a 5xx or a leader election).
func transient(err error) bool {
	var jsErr jetstream.JetStreamError
	if errors.As(err, &jsErr) && jsErr.APIError() != nil {
		code := jsErr.APIError().Code
		return code >= 500 || errors.Is(err, jetstream.ErrStreamNotFound)
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrJetStreamNotEnabled)
}

// ensureStreamOnce is one attempt of ensureStream.
func ensureStreamOnce(ctx context.Context, js jetstream.JetStream, cfg StreamConfig, seen uint64) (created bool, _ error) {
	req := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, streamRequestTimeout) }
	want := cfg.jetstream()
	rctx, cancel := req()
	st, err := js.Stream(rctx, cfg.Name)
	cancel()
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		create := want
		create.FirstSeq = firstSeq(time.Now(), seen)
		rctx, cancel := req()
		_, err = js.CreateStream(rctx, create)
		cancel()
		if err == nil {
			return true, ensureHubConsumer(ctx, js, cfg)
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return false, fmt.Errorf("cannot create stream %s: %w", cfg.Name, err)
		}
		// Another process created it meanwhile (with its own first
		// sequence): update that one, once it can be found.
		rctx, cancel = req()
		st, err = js.Stream(rctx, cfg.Name)
		cancel()
	}
	if err != nil {
		return false, fmt.Errorf("cannot look up stream %s: %w", cfg.Name, err)
	}
	rctx, cancel = req()
	err = checkDroppedSubjects(rctx, st, want.Subjects)
	cancel()
	if err != nil {
		return false, fmt.Errorf("cannot update stream %s: %w", cfg.Name, err)
	}
	have := st.CachedInfo().Config
	want.FirstSeq = have.FirstSeq // set at creation, never changed
	if !holds(have, want) {
		rctx, cancel = req()
		_, err = js.UpdateStream(rctx, want)
		cancel()
		if err != nil {
			return false, fmt.Errorf("cannot update stream %s: %w", cfg.Name, err)
		}
	}
	return false, ensureHubConsumer(ctx, js, cfg)
}

// holds reports whether a stream configured as have already has every
// setting of want (StreamConfig.jetstream's fields), so that an update
// would change none of them. A stream with sources is always updated (the
// broker reports a source's domain in another form). Skipping the no-op
// update matters beyond the request it saves: processes that find a
// stream another one just created update it while their peers create
// consumers on it, and nats-server 2.15.2 reads the stream's file-store
// config without its lock while creating a consumer (a data race the race
// detector reports in tests that embed the broker).
func holds(have, want jetstream.StreamConfig) bool {
	if len(have.Sources) > 0 || len(want.Sources) > 0 {
		return false
	}
	return have.Name == want.Name && have.Description == want.Description &&
		slices.Equal(have.Subjects, want.Subjects) && have.Retention == want.Retention &&
		have.Storage == want.Storage && max(have.Replicas, 1) == max(want.Replicas, 1) &&
		have.MaxAge == want.MaxAge && have.Duplicates == want.Duplicates &&
		have.Discard == want.Discard && have.MaxMsgs == want.MaxMsgs && have.MaxBytes == want.MaxBytes
}

// recreateStream creates the stream again if the broker does not have it
// (any more), starting above seen; a stream that exists is left alone. It
// reports whether it created the stream; a failed creation (after the
// stream was found missing) is a *createError.
func recreateStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig, seen uint64) (created bool, _ error) {
	_, err := js.Stream(ctx, cfg.Name)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, jetstream.ErrStreamNotFound):
		created, err := ensureStream(ctx, js, cfg, seen)
		if err != nil {
			err = &createError{err}
		}
		return created, err
	default:
		return false, fmt.Errorf("cannot look up stream %s: %w", cfg.Name, err)
	}
}

// createError is recreateStream's failure to create the stream it found
// missing (not a failed lookup): the creation's outcome may be unknown.
type createError struct{ err error }

func (e *createError) Error() string { return e.err.Error() }
func (e *createError) Unwrap() error { return e.err }

// firstSeq is the first sequence of a stream created at now by a process
// that has seen sequences up to seen: the larger of seen+1 and now in
// microseconds since 1970. A stream created again after a broker lost it
// (and with it the last sequence) thus starts above every sequence the
// lost one used, as long as that one took fewer than a million messages a
// second since it was created (partial-sum streams take hundreds) and the
// creators' clocks agree to within the time between the two creations.
// Sequences stay below 2^53 (until the year 2255), so they survive a JSON
// number anywhere.
func firstSeq(now time.Time, seen uint64) uint64 {
	return max(uint64(now.UnixMicro()), seen+1)
}

// streamGone reports whether err says that a stream the caller relies on
// does not exist (any more): the broker lost it, or it was deleted. A
// publish then finds nothing that stores its subject, a lookup or a
// consumer creation names a missing stream.
func streamGone(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound)
}

// checkDroppedSubjects fails if a subject the stream has now but keeps not
// in subjects still holds messages: they would stay in the stream unread.
func checkDroppedSubjects(ctx context.Context, st jetstream.Stream, subjects []string) error {
	keep := make(map[string]bool, len(subjects))
	for _, s := range subjects {
		keep[s] = true
	}
	var dropped []string
	for _, s := range st.CachedInfo().Config.Subjects {
		if !keep[s] {
			dropped = append(dropped, s)
		}
	}
	for _, s := range dropped {
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(s))
		if err != nil {
			return fmt.Errorf("cannot count messages on %s: %w", s, err)
		}
		if n := info.State.Subjects[s]; n > 0 {
			return fmt.Errorf("%w: %s has %d messages", ErrPartitionInUse, s, n)
		}
	}
	return nil
}

// validName reports whether s can name a stream or consumer.
func validName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(".*>/\\", c) >= 0 {
			return false
		}
	}
	return true
}

// validToken reports whether s is one subject token that can also name a
// stream: what a JetStream domain or a region label must be here.
func validToken(s string) bool { return validName(s) }

// validSubjectPrefix reports whether s is a literal subject: dot-separated
// non-empty tokens of printable ASCII without wildcards.
func validSubjectPrefix(s string) bool {
	if s == "" {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || tok == "*" || tok == ">" {
			return false
		}
		for i := 0; i < len(tok); i++ {
			if c := tok[i]; c <= ' ' || c >= 0x7f {
				return false
			}
		}
	}
	return true
}
