package keywarden

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"strconv"
	"sync"
	"time"
)

// The realtime channel (the server's docs/protocol.md "Realtime channel"): heartbeat calls over one
// WebSocket and pushes (revoked, update_required, notice). Nothing is believed unverified: the hello
// must be signed by a pinned key over THIS client's session and fresh X25519 key; every later frame must
// carry this connection's MAC and the next sequence number. A frame that fails is refused: the
// connection is dropped, the message ignored.

// Close codes after which the channel is not reopened for this session (stop, superseded, revoked, idle).
var finalClose = map[int]bool{1000: true, 4001: true, 4003: true, 4008: true}

// push is a pushed message: typ is "revoked", "update_required" or "notice".
type push struct {
	typ, reason, detail, message, latestVersion, updateURL, at string
}

type channelReply struct {
	body map[string]any
	err  *Error
}

type channelConn struct {
	c         *Client
	ws        *wsConn
	s2c, c2s  []byte
	mu        sync.Mutex
	out, in   int64
	pending   map[int64]chan channelReply
	closed    bool
	closeCode int
	closeErr  *Error
	onPush    func(push)
	onClose   func(code int, err *Error)
}

func (cc *channelConn) open() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return !cc.closed
}

// connectChannel opens one verified connection. offered is false when the server has no channel (404/405).
func connectChannel(ctx context.Context, c *Client, session string) (conn *channelConn, err *Error, offered bool) {
	key, kerr := newChannelKey()
	if kerr != nil {
		return nil, newError(CodeNetwork, "channel: %v", kerr), true
	}
	version := c.cfg.Version
	if version == "" {
		version = "1.0"
	}
	headers := map[string]string{"X-Session": session, "X-Nonce": key.public, "X-Client-Version": version}
	c.mu.Lock()
	if c.route != "" {
		headers["X-Keywarden-Route"] = c.route
	}
	c.mu.Unlock()
	if c.cfg.APISecret != "" {
		ts := strconv.FormatInt(int64(unixSeconds(c.ServerNow())), 10)
		headers["X-Timestamp"] = ts
		headers["X-Signature"] = RequestSignature(c.cfg.APISecret, CanonicalRequest("GET", ChannelPath, ts, key.public, nil))
	}
	openTimeout := c.timeout
	if openTimeout > 5*time.Second {
		openTimeout = 5 * time.Second
	}
	ws, refused, werr := openWebSocket(ctx, c.baseURL+ChannelPath, headers, openTimeout)
	if werr != nil {
		e := newError(CodeNetwork, "channel: %v", werr)
		e.NotSent = true
		return nil, e, true
	}
	if refused != nil {
		return nil, channelRefusal(c, key.public, refused), refused.status != 404 && refused.status != 405
	}
	type msg struct {
		data   []byte
		binary bool
	}
	var (
		lock   sync.Mutex
		first  = make(chan struct{}, 1)
		hello  *msg
		queue  []msg
		cc     *channelConn
		closed = -1
	)
	ws.onMessage = func(data []byte, binary bool) {
		lock.Lock()
		switch {
		case hello == nil:
			hello = &msg{data, binary}
			lock.Unlock()
			select {
			case first <- struct{}{}:
			default:
			}
			return
		case cc != nil:
			target := cc
			lock.Unlock()
			target.receive(data, binary)
			return
		default:
			queue = append(queue, msg{data, binary})
		}
		lock.Unlock()
	}
	ws.onClose = func(code int) {
		lock.Lock()
		closed = code
		target := cc
		lock.Unlock()
		select {
		case first <- struct{}{}:
		default:
		}
		if target != nil {
			target.finish(code, nil)
		}
	}
	ws.start()
	select {
	case <-first:
	case <-time.After(openTimeout):
	case <-ctx.Done():
	}
	lock.Lock()
	h := hello
	lock.Unlock()
	if h == nil {
		ws.terminate()
		return nil, newError(CodeNetwork, "channel: no hello"), true
	}
	if h.binary {
		ws.terminate()
		return nil, verificationError(ReasonMalformed, "channel hello is not a text frame"), true
	}
	s2c, c2s, verr := verifyChannelHello(c.keys, unixSeconds(c.ServerNow()), session, key.public, key.secret[:], h.data)
	if verr != nil {
		ws.terminate()
		return nil, verr, true
	}
	conn = &channelConn{c: c, ws: ws, s2c: s2c, c2s: c2s, pending: map[int64]chan channelReply{}, onPush: func(push) {}, onClose: func(int, *Error) {}}
	lock.Lock()
	cc = conn
	pendingMsgs := queue
	queue = nil
	code := closed
	lock.Unlock()
	for _, m := range pendingMsgs {
		conn.receive(m.data, m.binary)
	}
	if code >= 0 {
		conn.finish(code, nil)
	}
	return conn, nil, true
}

func channelRefusal(c *Client, nonce string, r *wsRefused) *Error {
	_, verr := verifyResponse(c.keys, signedAnswer{method: "GET", path: ChannelPath, status: r.status,
		kid: r.header.Get("X-Response-Kid"), ts: r.header.Get("X-Response-Timestamp"), sig: r.header.Get("X-Response-Signature"),
		body: r.body, nonce: nonce}, unixSeconds(c.ServerNow()), windowSeconds)
	if verr != nil {
		return verr // unsigned (a proxy that does not pass WebSockets): nothing in it is believed
	}
	var v map[string]any
	if json.Unmarshal(r.body, &v) != nil || v == nil {
		return verificationError(ReasonMalformed, fmt.Sprintf("channel refusal %d is not JSON", r.status))
	}
	return errorFromAnswer(r.status, v["detail"], r.header.Get("Retry-After"))
}

// call sends one call and waits for its reply; network with NotSent when the channel was already down.
func (cc *channelConn) call(ctx context.Context, op string, body map[string]any) (map[string]any, *Error) {
	rest := map[string]any{}
	for k, v := range body {
		if k != "session" {
			rest[k] = v
		}
	}
	done := make(chan channelReply, 1)
	cc.mu.Lock()
	if cc.closed {
		cc.mu.Unlock()
		e := newError(CodeNetwork, "channel closed")
		e.NotSent = true
		return nil, e
	}
	cc.out++
	seq := cc.out
	cc.pending[seq] = done
	payload, _ := json.Marshal(map[string]any{"seq": seq, "type": "call", "op": op, "body": rest})
	sent := cc.ws.send(SealFrame(cc.c2s, payload), 0x2)
	cc.mu.Unlock()
	if !sent {
		cc.mu.Lock()
		delete(cc.pending, seq)
		cc.mu.Unlock()
		e := newError(CodeNetwork, "channel closed")
		e.NotSent = true
		return nil, e
	}
	timer := time.NewTimer(cc.c.timeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.body, r.err
	case <-timer.C:
	case <-ctx.Done():
	}
	cc.mu.Lock()
	delete(cc.pending, seq)
	cc.mu.Unlock()
	return nil, newError(CodeTimeout, "no answer to %s on the channel within %s", op, cc.c.timeout)
}

func (cc *channelConn) close(code int) { cc.ws.close(code) }

func (cc *channelConn) receive(data []byte, binary bool) {
	cc.mu.Lock()
	if cc.closed {
		cc.mu.Unlock()
		return
	}
	m, err := readChannelFrame(cc.s2c, cc.in+1, data, binary)
	if err != nil {
		cc.mu.Unlock()
		cc.c.log.Printf("keywarden.channel.refused: %s", err.Reason)
		cc.finish(1006, err)
		cc.ws.terminate()
		return
	}
	cc.in++
	onPush := cc.onPush
	var reply chan channelReply
	if m["type"] == "reply" {
		if re, ok := jsonInt(m["re"]); ok {
			reply = cc.pending[re]
			delete(cc.pending, re)
		}
	}
	cc.mu.Unlock()
	str := func(v any) string { s, _ := v.(string); return s }
	switch m["type"] {
	case "reply":
		if reply == nil {
			return
		}
		body, _ := m["body"].(map[string]any)
		if body == nil {
			body = map[string]any{}
		}
		status, _ := jsonInt(m["status"])
		if status == 200 {
			if body["success"] == true {
				reply <- channelReply{body: body}
			} else {
				reply <- channelReply{err: verificationError(ReasonMalformed, "channel reply lacks success: true")}
			}
			return
		}
		retry := ""
		if v, ok := m["retry_after"]; ok && v != nil {
			retry = fmt.Sprint(v)
		}
		reply <- channelReply{err: errorFromAnswer(int(status), body["detail"], retry)}
	case "revoked":
		onPush(push{typ: "revoked", reason: str(m["reason"]), detail: str(m["detail"])})
	case "update_required":
		d, _ := m["detail"].(map[string]any)
		msg := str(d["message"])
		if msg == "" {
			msg = "A new version is required."
		}
		onPush(push{typ: "update_required", message: msg, latestVersion: str(d["latest_version"]), updateURL: str(d["update_url"])})
	case "notice":
		onPush(push{typ: "notice", message: str(m["message"]), at: str(m["at"])})
	}
	// pong, or a type of a newer server: verified, harmless to skip
}

func (cc *channelConn) finish(code int, err *Error) {
	cc.mu.Lock()
	if cc.closed {
		cc.mu.Unlock()
		return
	}
	cc.closed = true
	cc.closeCode, cc.closeErr = code, err
	onClose := cc.onClose
	pending := cc.pending
	cc.pending = map[int64]chan channelReply{}
	cc.mu.Unlock()
	for _, p := range pending {
		// Sent, unanswered: the server may have acted on it (like a REST answer lost on the way).
		e := err
		if e == nil {
			e = newError(CodeNetwork, "channel closed (%d) before the answer", code)
		}
		p <- channelReply{err: e}
	}
	onClose(code, err)
}

// linkEvent goes from the link to its heartbeat: a push, or a state change ("open"/"closed").
type linkEvent struct {
	push  *push
	state string
	code  int
	err   *Error
}

// channelLink is the heartbeat's channel: opens it, reopens it after a drop (0.5 s doubling up to 30 s),
// gives up when the server has none or closed it for good.
type channelLink struct {
	c        *Client
	mu       sync.Mutex
	session  string
	conn     *channelConn
	timer    *time.Timer
	attempts int
	off      bool
	sink     func(linkEvent)
	backlog  []linkEvent
}

func newChannelLink(c *Client, session string) *channelLink {
	return &channelLink{c: c, session: session}
}

func (l *channelLink) attach(sink func(linkEvent)) {
	l.mu.Lock()
	l.sink = sink
	backlog := l.backlog
	l.backlog = nil
	l.mu.Unlock()
	for _, e := range backlog {
		sink(e)
	}
}

func (l *channelLink) emit(e linkEvent) {
	l.mu.Lock()
	s := l.sink
	if s == nil {
		l.backlog = append(l.backlog, e)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	s(e)
}

func (l *channelLink) ready() bool {
	l.mu.Lock()
	c := l.conn
	l.mu.Unlock()
	return c != nil && c.open()
}

func (l *channelLink) connect() bool {
	l.mu.Lock()
	if l.off {
		l.mu.Unlock()
		return false
	}
	if l.conn != nil && l.conn.open() {
		l.mu.Unlock()
		return true
	}
	session := l.session
	l.mu.Unlock()
	conn, err, offered := connectChannel(context.Background(), l.c, session)
	l.mu.Lock()
	if l.off || session != l.session {
		l.mu.Unlock()
		if conn != nil {
			conn.close(1000)
		}
		return false
	}
	if conn == nil {
		l.c.log.Printf("keywarden.channel.unavailable: %s", err.Message)
		transient := err.Code == CodeNetwork || err.Code == CodeTimeout || err.Code == CodeVerification || err.Code == CodeRateLimited || err.Code == CodeServer
		if !offered || !transient {
			l.off = true
		} else {
			l.retryLocked(err.RetryAfter)
		}
		l.mu.Unlock()
		l.emit(linkEvent{state: "closed", err: err})
		return false
	}
	l.attempts = 0
	l.conn = conn
	l.mu.Unlock()
	conn.mu.Lock()
	conn.onPush = func(p push) { l.emit(linkEvent{push: &p}) }
	conn.onClose = func(code int, e *Error) { l.closed(conn, code, e) }
	closed, code, cerr := conn.closed, conn.closeCode, conn.closeErr
	conn.mu.Unlock()
	l.emit(linkEvent{state: "open"})
	if closed { // refused a frame right behind the hello, before onClose was set
		l.closed(conn, code, cerr)
	}
	return l.ready()
}

func (l *channelLink) closed(conn *channelConn, code int, err *Error) {
	l.mu.Lock()
	if l.conn == conn {
		l.conn = nil
	}
	if finalClose[code] {
		l.off = true
	} else {
		l.retryLocked(-1)
	}
	l.mu.Unlock()
	l.emit(linkEvent{state: "closed", code: code, err: err})
}

func (l *channelLink) call(ctx context.Context, op string, body map[string]any) (map[string]any, *Error) {
	l.mu.Lock()
	c := l.conn
	l.mu.Unlock()
	if c == nil {
		e := newError(CodeNetwork, "channel closed")
		e.NotSent = true
		return nil, e
	}
	return c.call(ctx, op, body)
}

// rebind moves the link to a new session and connects.
func (l *channelLink) rebind(session string) bool {
	l.mu.Lock()
	l.session = session
	old := l.conn
	l.conn = nil
	l.attempts = 0
	l.off = false
	l.mu.Unlock()
	if old != nil {
		old.close(1000)
	}
	return l.connect()
}

func (l *channelLink) close() {
	l.mu.Lock()
	l.off = true
	if l.timer != nil {
		l.timer.Stop()
	}
	old := l.conn
	l.conn = nil
	l.mu.Unlock()
	if old != nil {
		old.close(1000)
	}
}

func (l *channelLink) retryLocked(hint float64) {
	if l.off {
		return
	}
	base := 0.5 * float64(int64(1)<<uint(minInt(l.attempts, 6)))
	if base > 30 {
		base = 30
	}
	l.attempts++
	delay := base * (0.8 + rand.Float64()*0.4)
	if hint > delay {
		delay = hint
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	l.timer = time.AfterFunc(time.Duration(delay*float64(time.Second)), func() {
		defer func() { _ = recover() }()
		l.connect()
	})
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}
