package keywarden

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// EventKind names a heartbeat event.
type EventKind string

const (
	// EventBeat: a beat whose signature and proof verified (Index, Count).
	EventBeat EventKind = "beat"
	// EventDegraded: a beat failed (Err, Lost: the token may have moved on, Reauthenticating, LastBeatAt,
	// VerificationFailures in a row).
	EventDegraded EventKind = "degraded"
	// EventCompromised: CompromisedAfter verification failures in a row: answers are being tampered with;
	// automatic re-authentication stops (the program decides).
	EventCompromised EventKind = "compromised"
	// EventRecovered: re-authentication opened a new heartbeat session (Session).
	EventRecovered EventKind = "recovered"
	// EventKilled: the server ended it (debugger, revoked, banned, expired...): final (Err).
	EventKilled EventKind = "killed"
	// EventStopped: the loop has ended (Reason "stop" or "killed").
	EventStopped EventKind = "stopped"
	// EventRevoked: pushed on the realtime channel: key, user or app revoked (Reason, Detail); killed follows.
	EventRevoked EventKind = "revoked"
	// EventUpdateRequired: pushed: this version is outdated (Message, LatestVersion, UpdateURL).
	EventUpdateRequired EventKind = "update_required"
	// EventNotice: pushed: a message from the vendor's dashboard (Message, At).
	EventNotice EventKind = "notice"
	// EventChannel: the realtime channel opened (State "open") or closed (State "closed", Code, Err).
	EventChannel EventKind = "channel"
	// EventOffline: the service cannot be reached (network, timeout, 5xx) and the grace period (docs/protocol.md
	// 12.6) covers now: the license stays valid until GraceUntil.
	EventOffline EventKind = "offline"
	// EventGraceExpired: still unreachable, and the grace period is over (GraceUntil, Err): told the moment
	// it ends; the heartbeat goes on trying.
	EventGraceExpired EventKind = "grace_expired"
	// EventExpired: the license reached its expiry while running (docs/protocol.md 12.8): ExpiresAt, Err (code
	// expired). Grace never covers it; killed and stopped follow.
	EventExpired EventKind = "expired"
)

// Event is one heartbeat event; the fields that apply depend on Kind (see the EventKind constants).
type Event struct {
	Kind                 EventKind
	Index, Count         int64
	Err                  *Error
	Lost                 bool
	Reauthenticating     bool
	LastBeatAt           time.Time
	VerificationFailures int
	Session              string
	Reason               string
	Detail               string
	Message              string
	LatestVersion        string
	UpdateURL            string
	At                   string
	State                string
	Code                 int
	GraceUntil           time.Time
	ExpiresAt            *time.Time
}

// Heartbeat states.
const (
	StateHealthy     = "healthy"     // the last beat verified
	StateOffline     = "offline"     // unreachable, within the grace period
	StateDegraded    = "degraded"    // the last beat did not reach the server or did not verify
	StateCompromised = "compromised" // CompromisedAfter verification failures in a row
	StateRevoked     = "revoked"     // ended by a push
	StateKilled      = "killed"      // ended by the server
	StateExpired     = "expired"     // ended: the license expired (docs/protocol.md 12.8)
	StateStopped     = "stopped"     // ended by Stop
)

// HeartbeatOptions configure StartHeartbeat; the zero value is usable.
type HeartbeatOptions struct {
	SystemID string        // default MachineHWID
	CodeHash string        // default SelfHash of the running executable
	Interval time.Duration // default the server's beat_interval
	CodeSize int64         // sent when > 0
	// DebuggerDetected is reported with every beat (default DebuggerAttached).
	DebuggerDetected func() bool
	// Reauth: re-authenticate by itself (init + the same activation + heartbeat/start) when the token may
	// have been lost, or once when a beat is refused right after an outage (a restarted server).
	Reauth bool
	// ReauthFunc replaces Client.Reauthenticate for that (implies Reauth).
	ReauthFunc func(ctx context.Context, c *Client) error
	// ChannelOff keeps the beats on REST (default: the realtime channel when the server offers it).
	ChannelOff bool
	// CompromisedAfter verification failures in a row emit compromised (default 5).
	CompromisedAfter int
	// OnEvent receives every event, in order, on one goroutine (attached before the first beat).
	OnEvent func(Event)
}

// HeartbeatStart is what heartbeat/start answered, after its proof verified.
type HeartbeatStart struct {
	Session      string
	Token        string
	BeatInterval int64
}

// Answers after which beating on is pointless.
var finalCodes = map[ErrorCode]bool{
	CodeHeartbeatKilled: true, CodeBanned: true, CodeExpired: true, CodeAppDisabled: true, CodeInvalidKey: true,
	CodeHWIDMismatch: true, CodeUpdateRequired: true, CodeKeyUsed: true,
}

// unreachable: the service could not be reached or could not answer (connection error, timeout, 5xx).
func unreachable(e *Error) bool {
	return e.Code == CodeNetwork || e.Code == CodeTimeout || e.Status >= 500
}

// Heartbeat is a running heartbeat (docs/protocol.md 6) on its own goroutine, made by Client.StartHeartbeat.
type Heartbeat struct {
	c        *Client
	opts     HeartbeatOptions
	systemID string
	codeHash string
	link     *channelLink

	beatMu sync.Mutex // held while a beat is sent and judged
	mu     sync.Mutex
	// token chain
	session              string
	token                string
	interval             int64
	lastIndex            int64
	count                int64
	needsReauth          bool
	ended                bool
	state                string
	lastVerified         time.Time
	verificationFailures int
	compromised          bool
	afterOutage          bool
	outageReauthSpent    bool
	offlineTold          bool
	lastUnreachable      *Error
	listeners            map[EventKind][]*func(Event)

	wake     chan struct{}
	evMu     sync.Mutex // guards sending on events against closing it
	evClosed bool
	events   chan Event
	done     chan struct{}
	started  bool
}

// StartHeartbeat opens a heartbeat session (its proof checked) and beats until stopped or killed.
func (c *Client) StartHeartbeat(ctx context.Context, o HeartbeatOptions) (*Heartbeat, error) {
	h, err := c.PrepareHeartbeat(ctx, o)
	if err != nil {
		return nil, err
	}
	h.Start()
	return h, nil
}

// PrepareHeartbeat is StartHeartbeat without starting the beats: attach listeners with On, then Start.
func (c *Client) PrepareHeartbeat(ctx context.Context, o HeartbeatOptions) (*Heartbeat, error) {
	if o.Interval < 0 {
		return nil, configErr("heartbeat interval must be positive")
	}
	if o.CompromisedAfter < 0 {
		return nil, configErr("compromised after must be a positive number")
	}
	if o.CompromisedAfter == 0 {
		o.CompromisedAfter = 5
	}
	if o.ReauthFunc != nil {
		o.Reauth = true
	}
	if o.DebuggerDetected == nil {
		o.DebuggerDetected = DebuggerAttached
	}
	systemID := o.SystemID
	if systemID == "" {
		systemID = c.MachineHWID()
	}
	code := o.CodeHash
	if code == "" {
		var err error
		if code, err = SelfHash(""); err != nil {
			return nil, newError(CodeServer, "cannot hash the running program: %v (give CodeHash)", err)
		}
	}
	session, e := c.requireSession()
	if e != nil {
		return nil, e
	}
	var link *channelLink
	if !o.ChannelOff && !c.customHTTP {
		link = newChannelLink(c, session)
	}
	started, err := c.openHeartbeat(ctx, systemID, link)
	if err != nil {
		if link != nil {
			link.close()
		}
		return nil, err
	}
	h := &Heartbeat{
		c: c, opts: o, systemID: systemID, codeHash: code, link: link,
		session: started.Session, token: started.Token, interval: started.BeatInterval, state: StateHealthy,
		lastVerified: time.Now().UTC(), listeners: map[EventKind][]*func(Event){},
		wake: make(chan struct{}, 1), events: make(chan Event, 256), done: make(chan struct{}),
	}
	return h, nil
}

// openHeartbeat calls heartbeat/start (on the channel when link opens, else REST) and checks the proof
// before the token is trusted.
func (c *Client) openHeartbeat(ctx context.Context, systemID string, link *channelLink) (*HeartbeatStart, *Error) {
	session, e := c.requireSession()
	if e != nil {
		return nil, e
	}
	var r map[string]any
	if link != nil && link.rebind(session) {
		var err *Error
		r, err = link.call(ctx, "heartbeat/start", map[string]any{"system_id": systemID})
		if err != nil {
			if !err.NotSent {
				c.noteRefusal(err.Status)
				return nil, err
			}
			r = nil
		}
	}
	if r == nil {
		var err *Error
		if r, err = c.call(ctx, "heartbeat/start", map[string]any{"session": session, "system_id": systemID}); err != nil {
			return nil, err
		}
	}
	token, _ := r["token"].(string)
	interval, ok := jsonInt(r["beat_interval"])
	if token == "" || !ok {
		return nil, verificationError(ReasonMalformed, "heartbeat/start answer lacks token")
	}
	if !proofEquals(r["proof"], StartProof(session, systemID, token)) {
		return nil, verificationError(ReasonBadProof, "heartbeat/start proof does not verify")
	}
	c.grace.note(r)
	return &HeartbeatStart{Session: session, Token: token, BeatInterval: interval}, nil
}

// On adds a listener for one kind of event; it returns a function that removes it. Listeners run in
// order on one goroutine; one that panics is logged and ignored.
func (h *Heartbeat) On(kind EventKind, fn func(Event)) (remove func()) {
	p := &fn
	h.mu.Lock()
	h.listeners[kind] = append(h.listeners[kind], p)
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		list := h.listeners[kind]
		for i, q := range list {
			if q == p {
				h.listeners[kind] = append(list[:i:i], list[i+1:]...)
				return
			}
		}
	}
}

// Start starts the beating goroutine (StartHeartbeat calls it).
func (h *Heartbeat) Start() {
	h.mu.Lock()
	if h.started || h.ended {
		h.mu.Unlock()
		return
	}
	h.started = true
	h.mu.Unlock()
	go h.deliver()
	if h.link != nil {
		h.link.attach(h.onLink)
	}
	go h.run()
}

// State is healthy, offline, degraded, compromised, or how it ended: revoked, killed, expired, stopped.
func (h *Heartbeat) State() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state
}

// Session is the heartbeat's current client session.
func (h *Heartbeat) Session() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.session
}

// BeatInterval is the server's beat_interval in seconds.
func (h *Heartbeat) BeatInterval() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.interval
}

// BeatCount is the server's count of accepted beats.
func (h *Heartbeat) BeatCount() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

// LastBeatAt is when the last beat (or the start) verified.
func (h *Heartbeat) LastBeatAt() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastVerified
}

// Running reports whether the heartbeat has not ended.
func (h *Heartbeat) Running() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.ended
}

// OnChannel reports whether the beats travel on the realtime channel now.
func (h *Heartbeat) OnChannel() bool { return h.link != nil && h.link.ready() }

// Done is closed once the heartbeat has ended and its last event was delivered.
func (h *Heartbeat) Done() <-chan struct{} { return h.done }

// Stop stops beating, waits for a beat in flight and closes the heartbeat session on the server. Never
// fails; safe to call from a listener and more than once.
func (h *Heartbeat) Stop() {
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	h.beatMu.Lock()
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		h.beatMu.Unlock()
		return
	}
	h.ended = true
	h.state = StateStopped
	token := h.token
	started := h.started
	h.mu.Unlock()
	h.beatMu.Unlock()
	h.poke()
	ctx, cancel := context.WithTimeout(context.Background(), h.c.timeout)
	if _, err := h.send(ctx, "heartbeat/stop", map[string]any{"token": token}); err != nil {
		h.c.log.Printf("keywarden.heartbeat.stop_failed: %s", err.Message)
	}
	cancel()
	if h.link != nil {
		h.link.close()
	}
	h.finish(Event{Kind: EventStopped, Reason: "stop"}, started)
}

func (h *Heartbeat) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// finish queues the last event and closes the event stream.
func (h *Heartbeat) finish(last Event, started bool) {
	if !started {
		close(h.done)
		return
	}
	h.evMu.Lock()
	defer h.evMu.Unlock()
	if h.evClosed {
		return
	}
	h.events <- last
	h.evClosed = true
	close(h.events)
}

// emit queues an event for the delivering goroutine; after the last one nothing more is told.
func (h *Heartbeat) emit(e Event) {
	h.evMu.Lock()
	defer h.evMu.Unlock()
	if !h.evClosed {
		h.events <- e
	}
}

func (h *Heartbeat) deliver() {
	defer close(h.done)
	for e := range h.events {
		h.mu.Lock()
		list := append(([]*func(Event))(nil), h.listeners[e.Kind]...)
		h.mu.Unlock()
		if h.opts.OnEvent != nil {
			h.call(e, h.opts.OnEvent)
		}
		for _, fn := range list {
			h.call(e, *fn)
		}
	}
}

func (h *Heartbeat) call(e Event, fn func(Event)) {
	defer func() {
		if r := recover(); r != nil {
			h.c.log.Printf("keywarden.heartbeat.listener_panicked: %s: %v", e.Kind, r)
		}
	}()
	fn(e)
}

// send goes on the channel when it is open; over REST when it is not, or went down before the call left.
func (h *Heartbeat) send(ctx context.Context, op string, body map[string]any) (map[string]any, *Error) {
	if h.link != nil && h.link.ready() {
		r, err := h.link.call(ctx, op, body)
		if err == nil || !err.NotSent {
			return r, err
		}
	}
	h.mu.Lock()
	full := map[string]any{"session": h.session}
	h.mu.Unlock()
	for k, v := range body {
		full[k] = v
	}
	return h.c.call(ctx, op, full)
}

func (h *Heartbeat) onLink(e linkEvent) {
	h.mu.Lock()
	ended := h.ended
	h.mu.Unlock()
	if ended {
		return
	}
	if e.push == nil {
		h.emit(Event{Kind: EventChannel, State: e.state, Code: e.code, Err: e.err})
		return
	}
	switch p := e.push; p.typ {
	case "revoked":
		go h.revoked(*p)
	case "update_required":
		h.emit(Event{Kind: EventUpdateRequired, Message: p.message, LatestVersion: p.latestVersion, UpdateURL: p.updateURL})
	case "notice":
		h.emit(Event{Kind: EventNotice, Message: p.message, At: p.at})
	}
}

func (h *Heartbeat) revoked(p push) {
	defer func() { _ = recover() }()
	h.beatMu.Lock()
	defer h.beatMu.Unlock()
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	h.emit(Event{Kind: EventRevoked, Reason: p.reason, Detail: p.detail})
	if p.reason == "expired" {
		e := newError(CodeExpired, "expired: the license expired (%s)", p.detail)
		e.Detail = p.detail
		h.kill(e, StateExpired)
		return
	}
	e := newError(CodeHeartbeatKilled, "heartbeat_killed: revoked (%s): %s", p.reason, p.detail)
	e.Detail = p.detail
	h.kill(e, StateRevoked)
}

// --- the loop ---------------------------------------------------------------------------------------

func (h *Heartbeat) period() time.Duration {
	if h.opts.Interval > 0 {
		return h.opts.Interval
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return time.Duration(h.interval) * time.Second
}

// deadline is when an offline heartbeat must act without a beat: the end of the grace period or the
// license's expiry, whichever comes first (zero: none).
func (h *Heartbeat) deadline() time.Time {
	h.mu.Lock()
	state, outage := h.state, h.afterOutage
	h.mu.Unlock()
	if state != StateOffline && !(state == StateDegraded && outage) {
		return time.Time{}
	}
	var d time.Time
	if exp := h.c.LicenseExpiresAt(); exp != nil {
		d = *exp
	}
	if state == StateOffline {
		if ms := h.c.grace.untilMs(); ms != 0 && (d.IsZero() || timeFromMs(ms).Before(d)) {
			d = timeFromMs(ms)
		}
	}
	return d
}

func (h *Heartbeat) stateIs(s string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state == s
}

func (h *Heartbeat) run() {
	next := time.Now().Add(h.period())
	for {
		wait := time.Until(next)
		deadline := h.deadline()
		if !deadline.IsZero() {
			if d := deadline.Sub(h.c.ServerNow()); d < wait {
				wait = d
			}
		}
		if wait < 0 {
			wait = 0
		}
		timer := time.NewTimer(wait)
		select {
		case <-h.wake:
		case <-timer.C:
		}
		timer.Stop()
		if !h.Running() {
			return
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					h.c.log.Printf("keywarden.heartbeat.unexpected: %v", r)
				}
			}()
			if !deadline.IsZero() && !h.c.ServerNow().Before(deadline) {
				h.deadlinePassed()
			}
			if time.Now().Before(next) || !h.Running() {
				return
			}
			next = time.Now().Add(h.period())
			h.mu.Lock()
			reauth := h.needsReauth
			h.mu.Unlock()
			if reauth {
				h.reauthenticate()
				return
			}
			h.beatMu.Lock()
			defer h.beatMu.Unlock()
			h.beatOnce()
		}()
	}
}

// deadlinePassed: while the service cannot be reached, the license's expiry ends the heartbeat (grace
// never covers it, docs/protocol.md 12.8) and the end of the grace period leaves the offline state at once.
func (h *Heartbeat) deadlinePassed() {
	now := h.c.ServerNow()
	h.mu.Lock()
	state, lastErr := h.state, h.lastUnreachable
	h.mu.Unlock()
	if exp := h.c.LicenseExpiresAt(); exp != nil && !now.Before(*exp) && (state == StateOffline || state == StateDegraded) {
		e := newError(CodeExpired, "expired: the license expired at %s while the service could not be reached", exp.Format(time.RFC3339))
		h.kill(e, StateExpired)
		return
	}
	until := h.c.grace.untilMs()
	if state != StateOffline || until == 0 || now.UnixMilli() < until {
		return
	}
	h.mu.Lock()
	if h.state == StateOffline {
		h.state = StateDegraded
	}
	h.offlineTold = false
	h.mu.Unlock()
	if lastErr == nil {
		lastErr = newError(CodeNetwork, "the service could not be reached")
	}
	h.c.log.Printf("keywarden.heartbeat.grace_expired: the grace period ended at %s", timeFromMs(until).Format(time.RFC3339))
	h.emit(Event{Kind: EventGraceExpired, GraceUntil: timeFromMs(until), Err: lastErr})
}

// expiredRefusal: a beat refused as `rejected` once the license's expiry has passed is the expiry kill of
// docs/protocol.md 12.8 (the server's clock and ours agree within the learned offset; 5 s of slack).
func (h *Heartbeat) expiredRefusal(e *Error) *Error {
	exp := h.c.LicenseExpiresAt()
	if e.Code != CodeHeartbeatKilled || e.Status != 403 || exp == nil || h.c.ServerNow().Before(exp.Add(-5*time.Second)) {
		return nil
	}
	x := newError(CodeExpired, "expired: the license expired at %s (%s)", exp.Format(time.RFC3339), e.Message)
	x.Status, x.Detail = e.Status, e.Detail
	return x
}

// probeExpiry tells an expiry kill from any other: the server ends an expired key's session and its
// activation (docs/protocol.md 12.8), and a REST beat learns only `rejected`; the same activation on the same
// session answers the expiry itself ("License expired"). Asked once, when a beat is refused; any other
// answer leaves the kill as it was.
func (h *Heartbeat) probeExpiry(session string) *Error {
	h.c.mu.Lock()
	a := h.c.lastActivation
	h.c.mu.Unlock()
	if a == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.c.timeout)
	defer cancel()
	var err *Error
	if a.license != "" {
		_, err = h.c.call(ctx, "license", map[string]any{"session": session, "license": a.license, "hwid": a.hwid})
	} else {
		_, err = h.c.call(ctx, "login", map[string]any{"session": session, "username": a.username, "password": a.password, "hwid": a.hwid})
	}
	if err != nil && err.Code == CodeExpired {
		return err
	}
	return nil
}

func (h *Heartbeat) beatOnce() {
	h.mu.Lock()
	index := h.lastIndex + 1
	previous, session := h.token, h.session
	h.mu.Unlock()
	body := map[string]any{"token": previous, "system_id": h.systemID, "beat_index": index, "code_hash": h.codeHash}
	if h.opts.CodeSize > 0 {
		body["code_size"] = h.opts.CodeSize
	}
	body["debugger_detected"] = safeProbe(h.opts.DebuggerDetected)
	ctx, cancel := context.WithTimeout(context.Background(), h.c.timeout*time.Duration(h.c.retries+1)+5*time.Second)
	defer cancel()
	r, err := h.send(ctx, "heartbeat", body)
	var newToken string
	var count int64
	if err == nil {
		var ok bool
		newToken, _ = r["new_token"].(string)
		count, ok = jsonInt(r["beat_count"])
		if newToken == "" || !ok {
			err = verificationError(ReasonMalformed, "beat answer lacks new_token")
		} else if !proofEquals(r["proof"], BeatProof(previous, session, index, newToken, count)) {
			err = verificationError(ReasonBadProof, "beat proof does not verify")
		} else {
			h.c.grace.note(r)
		}
	}
	if err != nil {
		if !h.Running() {
			return // ended meanwhile (revoked, killed, stopped): this beat's failure is no degradation
		}
		h.mu.Lock()
		afterOutage, spent := h.afterOutage, h.outageReauthSpent
		h.mu.Unlock()
		if x := h.expiredRefusal(err); x != nil {
			h.kill(x, StateExpired)
			return
		}
		refused := err.Code == CodeHeartbeatKilled && err.Status == 403
		lostSession := refused && afterOutage && h.opts.Reauth && !spent
		if finalCodes[err.Code] && !lostSession {
			if refused {
				if x := h.probeExpiry(session); x != nil {
					h.kill(x, StateExpired)
					return
				}
			}
			h.kill(err, StateKilled)
			return
		}
		// Not processed: never sent, refused before the beat was looked at (429), or a verified 503 (the
		// service draining for a restart or without its database): the same index and token go again.
		lost := !(err.NotSent || err.Code == CodeRateLimited || err.Code == CodeLockedOut || (err.Status == 503 && err.Detail == "Service unavailable"))
		h.mu.Lock()
		if lostSession {
			h.outageReauthSpent = true
		}
		if lost {
			h.lastIndex = index // that index may have been used: never send it again
		}
		h.mu.Unlock()
		if h.failed(err, lost, lost && h.opts.Reauth) {
			h.mu.Lock()
			h.needsReauth = true
			h.mu.Unlock()
			h.reauthenticate()
		}
		return
	}
	h.mu.Lock()
	h.token = newToken
	h.lastIndex = index
	h.count = count
	h.lastVerified = time.Now().UTC()
	h.verificationFailures = 0
	h.compromised = false
	h.afterOutage = false
	h.outageReauthSpent = false
	h.offlineTold = false
	h.lastUnreachable = nil
	if h.ended {
		h.mu.Unlock()
		return
	}
	h.state = StateHealthy
	h.mu.Unlock()
	h.emit(Event{Kind: EventBeat, Index: index, Count: count})
}

func safeProbe(f func() bool) (v bool) {
	defer func() {
		if recover() != nil {
			v = false
		}
	}()
	return f()
}

// failed books a failure and emits degraded (and compromised when the streak of verification failures
// reaches the limit, offline when the grace period covers an unreachable service). Returns whether to
// re-authenticate: not once compromised.
func (h *Heartbeat) failed(e *Error, lost, wantsReauth bool) bool {
	h.c.noteRefusal(e.Status) // a refusal on the channel never went through Client.call
	unreach := unreachable(e)
	until := h.c.grace.untilMs()
	covered := unreach && h.c.grace.activeAt(h.c.ServerNow())
	h.mu.Lock()
	if e.Code == CodeVerification {
		h.verificationFailures++
	}
	h.afterOutage = unreach
	if unreach {
		h.lastUnreachable = e
	}
	newly := !h.compromised && h.verificationFailures >= h.opts.CompromisedAfter
	if newly {
		h.compromised = true
	}
	reauth := wantsReauth && !h.compromised
	if !reauth {
		h.needsReauth = false
	}
	if !h.ended {
		switch {
		case h.compromised:
			h.state = StateCompromised
		case covered:
			h.state = StateOffline
		default:
			h.state = StateDegraded
		}
	}
	// Grace never covers an expiry (docs/protocol.md 12.8): past the license's own expiry nothing of grace is told.
	exp := h.c.LicenseExpiresAt()
	expiredNow := unreach && exp != nil && !h.c.ServerNow().Before(*exp)
	goingOffline := covered && !h.compromised && !h.offlineTold && !expiredNow
	graceOver := unreach && !covered && h.offlineTold && until != 0 && !expiredNow
	if goingOffline {
		h.offlineTold = true
	}
	if graceOver || until == 0 {
		h.offlineTold = false
	}
	failures, last := h.verificationFailures, h.lastVerified
	h.mu.Unlock()
	h.emit(Event{Kind: EventDegraded, Err: e, Lost: lost, Reauthenticating: reauth, LastBeatAt: last, VerificationFailures: failures})
	if goingOffline && until != 0 {
		h.c.log.Printf("keywarden.heartbeat.offline: %s; valid until %s", e.Message, timeFromMs(until).Format(time.RFC3339))
		h.emit(Event{Kind: EventOffline, Err: e, GraceUntil: timeFromMs(until)})
	}
	if graceOver {
		h.emit(Event{Kind: EventGraceExpired, GraceUntil: timeFromMs(until), Err: e})
	}
	if newly {
		h.c.log.Printf("keywarden.heartbeat.compromised: %d verification failures in a row", failures)
		h.emit(Event{Kind: EventCompromised, Err: e, VerificationFailures: failures, LastBeatAt: last})
	}
	if expiredNow {
		h.kill(newError(CodeExpired, "expired: the license expired at %s while the service could not be reached", exp.Format(time.RFC3339)), StateExpired)
		return false
	}
	return reauth
}

// recover runs init + activation + heartbeat/start again; on failure it tries again at the next tick.
func (h *Heartbeat) reauthenticate() {
	ctx, cancel := context.WithTimeout(context.Background(), 4*h.c.timeout*time.Duration(h.c.retries+1))
	defer cancel()
	var err error
	if h.opts.ReauthFunc != nil {
		err = h.opts.ReauthFunc(ctx, h.c)
	} else {
		err = h.c.Reauthenticate(ctx)
	}
	var started *HeartbeatStart
	if err == nil {
		var e *Error
		if started, e = h.c.openHeartbeat(ctx, h.systemID, h.link); e != nil {
			err = e
		}
	}
	if err != nil {
		e, ok := err.(*Error)
		if !ok {
			e = newError(CodeServer, "re-authentication failed: %v", err)
		}
		if finalCodes[e.Code] {
			// The call's own error (banned: the key was banned meanwhile), not a generic one.
			state := StateKilled
			if e.Code == CodeExpired {
				state = StateExpired
			}
			h.kill(e, state)
			return
		}
		h.failed(e, true, true)
		return
	}
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		return
	}
	h.session, h.token, h.interval = started.Session, started.Token, started.BeatInterval
	h.lastIndex, h.count = 0, 0
	h.needsReauth, h.afterOutage = false, false
	h.mu.Unlock()
	h.emit(Event{Kind: EventRecovered, Session: started.Session})
}

func (h *Heartbeat) kill(e *Error, state string) {
	h.c.grace.end() // every kill is a verified refusal, a revocation or an expiry
	if e.Code == CodeExpired {
		state = StateExpired
	}
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		return
	}
	h.ended = true
	h.state = state
	started := h.started
	h.mu.Unlock()
	h.poke()
	if h.link != nil {
		h.link.close()
	}
	if state == StateExpired {
		h.c.log.Printf("keywarden.heartbeat.expired: %s", e.Message)
		h.emit(Event{Kind: EventExpired, Err: e, ExpiresAt: h.c.LicenseExpiresAt()})
	}
	h.emit(Event{Kind: EventKilled, Err: e})
	h.finish(Event{Kind: EventStopped, Reason: "killed"}, started)
}

// String is for logs.
func (h *Heartbeat) String() string {
	return fmt.Sprintf("keywarden.Heartbeat{state=%s, beats=%d}", h.State(), h.BeatCount())
}
