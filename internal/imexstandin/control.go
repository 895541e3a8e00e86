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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// The control queries the stand-in answers: nvidia-imex-ctl's -q and
// -N -j, sent as one line on the control socket.
const (
	QueryReady = "-q"
	QueryNodes = "-N -j"
)

// ReadyAnswer is what nvidia-imex-ctl -q prints, exactly, when the local
// daemon is ready; NotReadyAnswer is the stand-in's answer otherwise (the
// real text is not documented: a client must treat anything else as not
// ready).
const (
	ReadyAnswer    = "READY\n"
	NotReadyAnswer = "NOT_READY\n"
)

// Version is what the stand-in reports as its version in -N -j (the real
// daemon reports the driver's version, NVIDIA's --nogpu mode "NO_GPU").
const Version = "STAND_IN"

// NodesStatus is nvidia-imex-ctl -N -j's JSON.
type NodesStatus struct {
	// Nodes are every node of the node list, by index.
	Nodes map[string]NodeStatus `json:"nodes"`
	// Timestamp is when it was answered, as the real daemon writes it
	// ("9/4/2026 00:37:39.905").
	Timestamp string `json:"timestamp"`
	// Status is UP when the answering daemon is ready, DOWN otherwise.
	Status string `json:"status"`
}

// NodeStatus is one node of -N -j. The real output also has "changed"
// flags; the stand-in does not track changes and leaves them out.
type NodeStatus struct {
	// Status is READY for the answering node and each connected peer,
	// UNAVAILABLE for the others.
	Status string `json:"status"`
	// Host is the node's entry in the node list.
	Host string `json:"host"`
	// Connections are the node's view of every node: the answering
	// daemon's own, a connected peer's last heartbeat, INVALID for a
	// peer that is not connected.
	Connections map[string]Connection `json:"connections"`
	Version     string                `json:"version,omitempty"`
}

// Connection is one node's view of another.
type Connection struct {
	Host   string    `json:"host"`
	Status PeerState `json:"status"`
}

// Node statuses and domain statuses of -N -j.
const (
	NodeReady       = "READY"
	NodeUnavailable = "UNAVAILABLE"
	DomainUp        = "UP"
	DomainDown      = "DOWN"
)

// Nodes is the daemon's answer to -N -j.
func (d *Daemon) Nodes() NodesStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := NodesStatus{
		Nodes:     map[string]NodeStatus{},
		Timestamp: time.Now().Format("1/2/2006 15:04:05.000"),
		Status:    DomainDown,
	}
	if d.ready {
		out.Status = DomainUp
	}
	for i, host := range d.nodes {
		n := NodeStatus{Status: NodeUnavailable, Host: host, Connections: map[string]Connection{}}
		var view []PeerState
		switch {
		case i == d.self && d.ready:
			view = d.peers
		case i != d.self && d.peers[i] == PeerConnected:
			view = d.views[i]
		}
		if (i == d.self && d.ready) || (i != d.self && d.peers[i] == PeerConnected) {
			n.Status, n.Version = NodeReady, Version
		}
		for j, peer := range d.nodes {
			s := PeerInvalid
			if j < len(view) {
				s = view[j]
			}
			n.Connections[strconv.Itoa(j)] = Connection{Host: peer, Status: s}
		}
		out.Nodes[strconv.Itoa(i)] = n
	}
	return out
}

func (d *Daemon) acceptControl(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go d.answer(conn)
	}
}

// answer answers one control query, then closes the connection.
func (d *Daemon) answer(conn net.Conn) {
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return
	}
	if !d.waitIfHung() {
		return
	}
	switch strings.TrimSpace(line) {
	case QueryReady:
		if d.Ready() {
			_, _ = io.WriteString(conn, ReadyAnswer)
		} else {
			_, _ = io.WriteString(conn, NotReadyAnswer)
		}
	case QueryNodes:
		_ = json.NewEncoder(conn).Encode(d.Nodes())
	default:
		fmt.Fprintf(conn, "unknown query %q: ask %q or %q\n", strings.TrimSpace(line), QueryReady, QueryNodes)
	}
}

// DefaultQueryTimeout bounds a query whose context has no deadline.
const DefaultQueryTimeout = 5 * time.Second

// ask sends one query to the control socket and returns the answer.
func ask(ctx context.Context, socket, query string) (string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultQueryTimeout)
		defer cancel()
	}
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "unix", socket)
	if err != nil {
		return "", fmt.Errorf("IMEX daemon at %s: %w", socket, err)
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	// Closing the connection unblocks the read if ctx is cancelled early.
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	if _, err := io.WriteString(conn, query+"\n"); err != nil {
		return "", fmt.Errorf("IMEX daemon at %s: %w", socket, err)
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
			return "", fmt.Errorf("IMEX daemon at %s did not answer in time: %w", socket, err)
		}
		return "", fmt.Errorf("IMEX daemon at %s: %w", socket, err)
	}
	return string(b), nil
}

// Query does what nvidia-imex-ctl -q --u=<socket> does: it asks the
// daemon on the control socket whether it is ready. It answers true and no
// error when the daemon printed exactly READY; otherwise false and an
// error that says why (no daemon, no answer before ctx's deadline, or the
// daemon's own answer).
func Query(ctx context.Context, socket string) (bool, error) {
	answer, err := ask(ctx, socket, QueryReady)
	if err != nil {
		return false, err
	}
	if answer != ReadyAnswer {
		return false, fmt.Errorf("IMEX daemon at %s is not ready: it answered %q", socket, answer)
	}
	return true, nil
}

// QueryNodeStatus does what nvidia-imex-ctl -N -j --u=<socket> does.
func QueryNodeStatus(ctx context.Context, socket string) (NodesStatus, error) {
	answer, err := ask(ctx, socket, QueryNodes)
	if err != nil {
		return NodesStatus{}, err
	}
	var s NodesStatus
	if err := json.Unmarshal([]byte(answer), &s); err != nil {
		return NodesStatus{}, fmt.Errorf("IMEX daemon at %s: its node status is not JSON: %w", socket, err)
	}
	return s, nil
}
