package keywarden

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// A minimal RFC 6455 client for the realtime channel: masked client frames, fragments, ping/pong,
// close; one reader goroutine per connection. Its own rather than a library's, so that a refused
// upgrade's status, headers and signed body can be verified, and so the module has no dependency.

const (
	wsGUID       = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
	wsMaxMessage = 1 << 20
)

type wsConn struct {
	conn      net.Conn
	r         *bufio.Reader
	sendMu    sync.Mutex
	closeOnce sync.Once
	onMessage func(data []byte, binary bool)
	onClose   func(code int)
}

// wsRefused is an upgrade the server answered with something else than 101.
type wsRefused struct {
	status int
	header http.Header
	body   []byte
}

func openWebSocket(ctx context.Context, rawURL string, headers map[string]string, timeout time.Duration) (*wsConn, *wsRefused, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, err
	}
	secure := u.Scheme == "https"
	host := u.Host
	if u.Port() == "" {
		if secure {
			host = net.JoinHostPort(u.Hostname(), "443")
		} else {
			host = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(dctx, "tcp", host)
	if err != nil {
		return nil, nil, err
	}
	ok := false
	defer func() {
		if !ok {
			conn.Close()
		}
	}()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if secure {
		tc := tls.Client(conn, &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(dctx); err != nil {
			return nil, nil, err
		}
		conn = tc
	}
	keyBytes := make([]byte, 16)
	_, _ = rand.Read(keyBytes)
	key := base64.StdEncoding.EncodeToString(keyBytes)
	req, _ := http.NewRequest(http.MethodGet, rawURL, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", key)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if err := req.Write(conn); err != nil {
		return nil, nil, err
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, nil, err
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 65536))
		res.Body.Close()
		return nil, &wsRefused{status: res.StatusCode, header: res.Header, body: body}, nil
	}
	h := sha1.Sum([]byte(key + wsGUID))
	if res.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(h[:]) {
		return nil, nil, errors.New("the server did not accept the WebSocket handshake")
	}
	_ = conn.SetDeadline(time.Time{})
	ok = true
	return &wsConn{conn: conn, r: br, onMessage: func([]byte, bool) {}, onClose: func(int) {}}, nil, nil
}

func (w *wsConn) start() { go w.readLoop() }

func (w *wsConn) send(data []byte, opcode byte) bool {
	n := len(data)
	head := []byte{0x80 | opcode}
	switch {
	case n < 126:
		head = append(head, 0x80|byte(n))
	case n < 65536:
		head = append(head, 0x80|126, byte(n>>8), byte(n))
	default:
		head = append(head, 0x80|127)
		head = binary.BigEndian.AppendUint64(head, uint64(n))
	}
	mask := make([]byte, 4)
	_, _ = rand.Read(mask)
	frame := append(head, mask...)
	for i, b := range data {
		frame = append(frame, b^mask[i&3])
	}
	w.sendMu.Lock()
	defer w.sendMu.Unlock()
	_ = w.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := w.conn.Write(frame)
	return err == nil
}

func (w *wsConn) close(code int) {
	w.send([]byte{byte(code >> 8), byte(code)}, 0x8)
	w.terminate()
}

func (w *wsConn) terminate() { w.closeOnce.Do(func() { w.conn.Close() }) }

func (w *wsConn) readN(n uint64) ([]byte, error) {
	b := make([]byte, n)
	_, err := io.ReadFull(w.r, b)
	return b, err
}

func (w *wsConn) readLoop() {
	code := 1006
	defer func() {
		if r := recover(); r != nil {
			code = 1006
		}
		w.terminate()
		w.onClose(code)
	}()
	var fragments []byte
	binaryMsg := false
	for {
		h, err := w.readN(2)
		if err != nil {
			return
		}
		if h[1]&0x80 != 0 {
			return // a server must not mask
		}
		n := uint64(h[1] & 0x7f)
		if n == 126 {
			b, err := w.readN(2)
			if err != nil {
				return
			}
			n = uint64(binary.BigEndian.Uint16(b))
		} else if n == 127 {
			b, err := w.readN(8)
			if err != nil {
				return
			}
			n = binary.BigEndian.Uint64(b)
		}
		if n > wsMaxMessage || uint64(len(fragments))+n > wsMaxMessage {
			return
		}
		payload, err := w.readN(n)
		if err != nil {
			return
		}
		switch op := h[0] & 0x0f; op {
		case 0x0, 0x1, 0x2:
			if op != 0x0 {
				fragments, binaryMsg = nil, op == 0x2
			}
			fragments = append(fragments, payload...)
			if h[0]&0x80 != 0 {
				msg := fragments
				fragments = nil
				w.onMessage(msg, binaryMsg)
			}
		case 0x8:
			if len(payload) >= 2 {
				code = int(binary.BigEndian.Uint16(payload[:2]))
				w.send(payload[:2], 0x8)
			} else {
				code = 1005
				w.send(nil, 0x8)
			}
			return
		case 0x9:
			w.send(payload, 0xA)
		}
	}
}

func (r *wsRefused) String() string { return fmt.Sprintf("upgrade refused: %d", r.status) }
