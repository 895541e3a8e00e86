/*
Copyright The gpudra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package imexstandin

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// PeerState is what a daemon knows of one peer, as nvidia-imex-ctl -N
// names it.
type PeerState string

// The states of a peer.
const (
	// PeerConnected: the peer answered with the same node list.
	PeerConnected PeerState = "CONNECTED"
	// PeerUnavailable: never connected (-N's "N").
	PeerUnavailable PeerState = "UNAVAILABLE"
	// PeerDisconnected: it was connected and went away: it said it was
	// shutting down, its connection broke, or it stopped answering (-N's
	// "D").
	PeerDisconnected PeerState = "DISCONNECTED"
	// PeerInvalid: it answered with another node list, or as another node
	// (-N's "I"); it is refused until it agrees.
	PeerInvalid PeerState = "INVALID"
)

// DefaultHeartbeat is how often a daemon asks each connected peer for its
// view; a peer that has not answered in three heartbeats is DISCONNECTED.
const DefaultHeartbeat = time.Second

// Options are the stand-in's own settings, which imexd.cfg does not carry.
type Options struct {
	// Listener, if set, is the daemon's peer listener, already open: a
	// test opens one on 127.0.0.1:0 for each daemon and writes their
	// addresses in the node list. Otherwise the daemon listens on its
	// node list address at SERVER_PORT.
	Listener net.Listener
	// Heartbeat is DefaultHeartbeat when zero.
	Heartbeat time.Duration
}

// Daemon is one node's stand-in IMEX daemon.
//
// Readiness: the daemon is READY as soon as its config and node list are
// valid and it serves its peers and its control socket, whichever peers
// are up. That is IMEX_WAIT_FOR_QUORUM=NONE's meaning; RECOVERY waits
// only for nodes that had imported memory before an unsafe termination,
// and the stand-in never imports any, so under either setting it waits
// for no peer.
type Daemon struct {
	cfg       Config
	nodes     []string
	hash      string
	self      int
	heartbeat time.Duration
	ln        net.Listener

	stopOnce sync.Once
	stopping chan struct{} // closed by Stop
	done     chan struct{} // closed when Run has returned

	mu sync.Mutex
	// peers is this daemon's state of each node, by index (its own entry
	// is CONNECTED once it serves).
	peers []PeerState
	// views is the last view of each connected peer: its own peers.
	views map[int][]PeerState
	// ready is whether it serves.
	ready bool
	// resume is non-nil while the daemon is hung; Resume closes it.
	resume chan struct{}
	// conns are the open peer connections, told "bye" on Stop.
	conns map[*peerConn]struct{}
}

// New checks a daemon's config and node list and finds its own place in
// the list.
func New(cfg Config, nodes []string, opts Options) (*Daemon, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%s: no nodes: list every node of the IMEX domain", cfg.NodeConfigFile)
	}
	sum := sha256.Sum256([]byte(strings.Join(nodes, "\n")))
	d := &Daemon{
		cfg: cfg, nodes: nodes, hash: hex.EncodeToString(sum[:]),
		heartbeat: opts.Heartbeat, ln: opts.Listener,
		stopping: make(chan struct{}), done: make(chan struct{}),
		peers: make([]PeerState, len(nodes)), views: map[int][]PeerState{},
		conns: map[*peerConn]struct{}{},
	}
	if d.heartbeat <= 0 {
		d.heartbeat = DefaultHeartbeat
	}
	for i := range d.peers {
		d.peers[i] = PeerUnavailable
	}
	self, err := d.findSelf()
	if err != nil {
		return nil, err
	}
	d.self = self
	return d, nil
}

// findSelf is the index of this node in the node list: the entry of the
// listener's address, else of BIND_INTERFACE_IP, else of an address of
// this host's interfaces.
func (d *Daemon) findSelf() (int, error) {
	var want []string
	switch {
	case d.ln != nil:
		addr := d.ln.Addr().String()
		want = []string{addr}
		if host, p, err := net.SplitHostPort(addr); err == nil && p == strconv.Itoa(d.cfg.ServerPort) {
			want = append(want, host)
		}
	case d.cfg.BindInterfaceIP != "":
		want = []string{d.cfg.BindInterfaceIP}
	default:
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return 0, fmt.Errorf("IMEX: listing this host's addresses: %w", err)
		}
		for _, a := range addrs {
			if ipnet, ok := a.(*net.IPNet); ok {
				want = append(want, ipnet.IP.String())
			}
		}
	}
	if d.ln == nil {
		// A stand-in node list may name host:port (several daemons on one
		// address); this daemon's entry is then its address at
		// SERVER_PORT.
		for _, w := range want {
			want = append(want, net.JoinHostPort(w, strconv.Itoa(d.cfg.ServerPort)))
		}
	}
	for i, n := range d.nodes {
		for _, w := range want {
			if n == w {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("%s: this node (%s) is not in the node list: add its address, or set BIND_INTERFACE_IP to the address listed for it", d.cfg.NodeConfigFile, strings.Join(want, ", "))
}

// Index is this daemon's place in the node list.
func (d *Daemon) Index() int { return d.self }

// addr is where node i's daemon listens.
func (d *Daemon) addr(i int) string {
	if _, _, err := net.SplitHostPort(d.nodes[i]); err == nil {
		return d.nodes[i]
	}
	return net.JoinHostPort(d.nodes[i], strconv.Itoa(d.cfg.ServerPort))
}

// Peers is this daemon's state of every node, by index.
func (d *Daemon) Peers() []PeerState {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]PeerState(nil), d.peers...)
}

// Ready says whether the daemon would answer READY.
func (d *Daemon) Ready() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ready
}

// Run serves until ctx ends or Stop is called, then tells its peers it is
// shutting down and returns. It returns an error at once when it cannot
// listen. A Daemon runs once; a restarted node is a new Daemon, as a
// restarted IMEX daemon is a new instance to its peers.
func (d *Daemon) Run(ctx context.Context) error {
	defer close(d.done)
	logger := klog.FromContext(ctx).WithValues("imexNode", d.self)
	if d.ln == nil {
		ln, err := net.Listen("tcp", d.addr(d.self))
		if err != nil {
			return fmt.Errorf("IMEX: listening for peers (SERVER_PORT): %w", err)
		}
		d.ln = ln
	}
	defer d.ln.Close()
	var ctl net.Listener
	if d.cfg.CmdEnabled && d.cfg.CmdUnixDomainPath != "" {
		// A socket left by a daemon that was killed: nobody listens on it.
		if err := os.Remove(d.cfg.CmdUnixDomainPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("IMEX: control socket (IMEX_CMD_UNIX_DOMAIN_PATH): %w", err)
		}
		l, err := net.Listen("unix", d.cfg.CmdUnixDomainPath)
		if err != nil {
			return fmt.Errorf("IMEX: control socket (IMEX_CMD_UNIX_DOMAIN_PATH): %w", err)
		}
		ctl = l
		defer ctl.Close()
	}
	d.mu.Lock()
	d.ready = true
	d.peers[d.self] = PeerConnected
	d.mu.Unlock()
	logger.V(2).Info("IMEX stand-in ready", "address", d.ln.Addr().String(), "nodes", len(d.nodes))

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); d.acceptPeers(logger) }()
	if ctl != nil {
		wg.Add(1)
		go func() { defer wg.Done(); d.acceptControl(ctl) }()
	}
	for i := range d.nodes {
		if i != d.self {
			wg.Add(1)
			go func() { defer wg.Done(); d.dialLoop(logger, i) }()
		}
	}
	select {
	case <-ctx.Done():
		d.signalStop()
	case <-d.stopping:
	}
	d.mu.Lock()
	d.ready = false
	conns := make([]*peerConn, 0, len(d.conns))
	for c := range d.conns {
		conns = append(conns, c)
	}
	d.mu.Unlock()
	// Tell every peer, on every connection, that this daemon is going, so
	// they mark it DISCONNECTED at once rather than after a timeout.
	for _, c := range conns {
		_ = c.send(message{Kind: kindBye, Index: d.self})
		_ = c.Close()
	}
	_ = d.ln.Close()
	if ctl != nil {
		_ = ctl.Close()
	}
	wg.Wait()
	if ctl != nil {
		_ = os.Remove(d.cfg.CmdUnixDomainPath)
	}
	logger.V(2).Info("IMEX stand-in stopped")
	return nil
}

func (d *Daemon) signalStop() { d.stopOnce.Do(func() { close(d.stopping) }) }

// Stop stops the daemon and waits for Run to return; call it once Run
// has been started (it waits for that Run).
func (d *Daemon) Stop() {
	d.signalStop()
	<-d.done
}

// Hang makes the daemon stop answering, as a daemon stopped with SIGSTOP
// does: connections are still accepted (the kernel accepts them), but
// neither peers nor control queries get an answer until Resume.
func (d *Daemon) Hang() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.resume == nil {
		d.resume = make(chan struct{})
	}
}

// Resume undoes Hang.
func (d *Daemon) Resume() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.resume != nil {
		close(d.resume)
		d.resume = nil
	}
}

// waitIfHung blocks while the daemon is hung; false means it is stopping.
func (d *Daemon) waitIfHung() bool {
	d.mu.Lock()
	r := d.resume
	d.mu.Unlock()
	if r == nil {
		return true
	}
	select {
	case <-r:
		return true
	case <-d.stopping:
		return false
	}
}

func (d *Daemon) isStopping() bool {
	select {
	case <-d.stopping:
		return true
	default:
		return false
	}
}

func (d *Daemon) setPeer(i int, s PeerState, view []PeerState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.peers[i] = s
	if s == PeerConnected && view != nil {
		d.views[i] = view
	}
	if s != PeerConnected {
		delete(d.views, i)
	}
}

// The peer protocol: one JSON message a line. The dialer sends hello and
// the listener answers hello; then the dialer sends a heartbeat every
// heartbeat and the listener answers with one; either side may send bye.
const (
	kindHello     = "hello"
	kindHeartbeat = "heartbeat"
	kindBye       = "bye"
)

type message struct {
	Kind      string      `json:"kind"`
	Index     int         `json:"index"`
	NodesHash string      `json:"nodesHash,omitempty"`
	View      []PeerState `json:"view,omitempty"`
}

// peerConn is one peer connection; wmu serialises writes, which come from
// its own goroutine and from Run's bye.
type peerConn struct {
	net.Conn
	r   *bufio.Reader
	wmu sync.Mutex
}

func (c *peerConn) send(m message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, err = c.Write(append(b, '\n'))
	return err
}

func (c *peerConn) receive(timeout time.Duration) (message, error) {
	if timeout > 0 {
		_ = c.SetReadDeadline(time.Now().Add(timeout))
	} else {
		_ = c.SetReadDeadline(time.Time{})
	}
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		return message{}, err
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		return message{}, fmt.Errorf("a peer sent %q: %w", line, err)
	}
	return m, nil
}

func (d *Daemon) track(conn net.Conn) (*peerConn, bool) {
	c := &peerConn{Conn: conn, r: bufio.NewReader(conn)}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.isStopping() {
		_ = conn.Close()
		return nil, false
	}
	d.conns[c] = struct{}{}
	return c, true
}

func (d *Daemon) untrack(c *peerConn) {
	d.mu.Lock()
	delete(d.conns, c)
	d.mu.Unlock()
	_ = c.Close()
}

func (d *Daemon) view() []PeerState { return d.Peers() }

// dialLoop keeps a connection to peer i, and its state, until the daemon
// stops.
func (d *Daemon) dialLoop(logger klog.Logger, i int) {
	timeout := 3 * d.heartbeat
	retry := time.NewTicker(d.heartbeat)
	defer retry.Stop()
	for {
		if !d.waitIfHung() {
			return
		}
		d.connectOnce(logger, i, timeout)
		select {
		case <-d.stopping:
			return
		case <-retry.C:
		}
	}
}

func (d *Daemon) connectOnce(logger klog.Logger, i int, timeout time.Duration) {
	conn, err := net.DialTimeout("tcp", d.addr(i), timeout)
	if err != nil {
		d.lost(i)
		return
	}
	c, ok := d.track(conn)
	if !ok {
		return
	}
	defer d.untrack(c)
	if err := c.send(message{Kind: kindHello, Index: d.self, NodesHash: d.hash}); err != nil {
		d.lost(i)
		return
	}
	m, err := c.receive(timeout)
	if err != nil || m.Kind != kindHello {
		d.lost(i)
		return
	}
	if m.NodesHash != d.hash || m.Index != i {
		// The real daemon refuses a peer whose node map differs. Said
		// once, when the peer turns invalid, not at every retry.
		if d.Peers()[i] != PeerInvalid {
			logger.Info("IMEX stand-in refused a peer: its node list differs", "peer", i, "address", d.addr(i), "peerIndex", m.Index)
		}
		d.setPeer(i, PeerInvalid, nil)
		return
	}
	d.setPeer(i, PeerConnected, nil)
	tick := time.NewTicker(d.heartbeat)
	defer tick.Stop()
	for {
		if !d.waitIfHung() {
			return
		}
		if err := c.send(message{Kind: kindHeartbeat, Index: d.self, View: d.view()}); err != nil {
			d.lost(i)
			return
		}
		m, err := c.receive(timeout)
		if err != nil || m.Kind == kindBye {
			d.lost(i)
			return
		}
		d.setPeer(i, PeerConnected, m.View)
		select {
		case <-d.stopping:
			return
		case <-tick.C:
		}
	}
}

// lost records that peer i is not connected: a CONNECTED peer becomes
// DISCONNECTED; one never connected stays UNAVAILABLE, and a refused one
// INVALID until it answers with the same node list.
func (d *Daemon) lost(i int) {
	if d.isStopping() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.peers[i] == PeerConnected {
		d.peers[i] = PeerDisconnected
	}
	delete(d.views, i)
}

func (d *Daemon) acceptPeers(logger klog.Logger) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := d.ln.Accept()
		if err != nil {
			return
		}
		c, ok := d.track(conn)
		if !ok {
			return
		}
		wg.Add(1)
		go func() { defer wg.Done(); defer d.untrack(c); d.servePeer(logger, c) }()
	}
}

// servePeer answers a peer that dialled this daemon.
func (d *Daemon) servePeer(logger klog.Logger, c *peerConn) {
	m, err := c.receive(3 * d.heartbeat)
	if err != nil || m.Kind != kindHello || !d.waitIfHung() {
		return
	}
	if err := c.send(message{Kind: kindHello, Index: d.self, NodesHash: d.hash}); err != nil {
		return
	}
	if m.NodesHash != d.hash {
		return
	}
	for {
		m, err := c.receive(0)
		if err != nil {
			return
		}
		if !d.waitIfHung() {
			return
		}
		switch m.Kind {
		case kindBye:
			if m.Index >= 0 && m.Index < len(d.nodes) && m.Index != d.self {
				d.lost(m.Index)
			}
			return
		case kindHeartbeat:
			if m.Index >= 0 && m.Index < len(d.nodes) && m.Index != d.self && m.View != nil {
				d.mu.Lock()
				if d.peers[m.Index] == PeerConnected {
					d.views[m.Index] = m.View
				}
				d.mu.Unlock()
			}
			if err := c.send(message{Kind: kindHeartbeat, Index: d.self, View: d.view()}); err != nil {
				return
			}
		}
	}
}
