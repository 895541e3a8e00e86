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
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// testHeartbeat is short so that a peer that goes away is seen soon, and
// long enough that a loaded test machine does not miss heartbeats.
const testHeartbeat = 100 * time.Millisecond

// node is one stand-in daemon of a test, on 127.0.0.1.
type node struct {
	d      *Daemon
	socket string
	errc   chan error
}

// listeners opens n peer listeners on ephemeral ports of 127.0.0.1; their
// addresses are the node list.
func listeners(t *testing.T, n int) ([]net.Listener, []string) {
	t.Helper()
	var lns []net.Listener
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return lns, addrs
}

// socketDir is short: a Unix socket path has at most 107 bytes.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "imex")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// start runs a daemon with the given node list on ln, through the real
// files: an imexd.cfg and a nodes_config.cfg written to disk and loaded.
func start(t *testing.T, ln net.Listener, nodes []string) *node {
	t.Helper()
	dir := socketDir(t)
	nodeFile := filepath.Join(dir, "nodes_config.cfg")
	if err := os.WriteFile(nodeFile, []byte("# the IMEX domain\n"+strings.Join(nodes, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "cmd.sock")
	cfgFile := filepath.Join(dir, "imexd.cfg")
	cfg := "IMEX_NODE_CONFIG_FILE=" + nodeFile + "\nIMEX_WAIT_FOR_QUORUM=RECOVERY\nIMEX_CMD_ENABLED=1\nIMEX_CMD_UNIX_DOMAIN_PATH=" + socket + "\n"
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	list, err := LoadNodes(c.NodeConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(c, list, Options{Listener: ln, Heartbeat: testHeartbeat})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{d: d, socket: socket, errc: make(chan error, 1)}
	go func() { n.errc <- d.Run(context.Background()) }()
	t.Cleanup(d.Stop)
	// Ready is set once both the peer listener and the control socket
	// serve.
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		select {
		case err := <-n.errc:
			t.Fatalf("Run: %v", err)
		default:
		}
		return d.Ready(), nil
	}); err != nil {
		t.Fatalf("node %d never became ready", d.Index())
	}
	return n
}

// eventually waits, bounded, until the daemon's peers are want.
func eventually(t *testing.T, n *node, want ...PeerState) {
	t.Helper()
	var got []PeerState
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got = n.d.Peers()
		return slices.Equal(got, want), nil
	})
	if err != nil {
		t.Fatalf("node %d's peers are %v, want %v", n.d.Index(), got, want)
	}
}

func ctx(t *testing.T, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

func TestDomainConnectsAndAnswers(t *testing.T) {
	lns, addrs := listeners(t, 3)
	var nodes []*node
	for _, ln := range lns {
		nodes = append(nodes, start(t, ln, addrs))
	}
	for _, n := range nodes {
		eventually(t, n, PeerConnected, PeerConnected, PeerConnected)
	}
	ready, err := Query(ctx(t, 5*time.Second), nodes[1].socket)
	if !ready || err != nil {
		t.Fatalf("-q: %v, %v; want ready", ready, err)
	}
	// Node 0's connections in node 2's answer are node 0's own view,
	// carried by its heartbeats.
	var s NodesStatus
	err = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		s, err = QueryNodeStatus(ctx, nodes[2].socket)
		if err != nil {
			return false, err
		}
		for _, n := range s.Nodes {
			for _, c := range n.Connections {
				if c.Status != PeerConnected {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("-N -j never showed every connection CONNECTED: %v: %+v", err, s)
	}
	if s.Status != DomainUp || len(s.Nodes) != 3 || s.Nodes["0"].Status != NodeReady || s.Nodes["0"].Host != addrs[0] ||
		s.Nodes["1"].Connections["2"].Host != addrs[2] || s.Timestamp == "" {
		t.Errorf("-N -j: %+v", s)
	}
}

func TestRefusesPeerWithAnotherNodeList(t *testing.T) {
	lns, addrs := listeners(t, 3)
	a := start(t, lns[0], addrs)
	b := start(t, lns[1], addrs)
	// Node 2 lists the same nodes in another order: another map, as a
	// tray with a stale node list would have.
	c := start(t, lns[2], []string{addrs[1], addrs[0], addrs[2]})
	eventually(t, a, PeerConnected, PeerConnected, PeerInvalid)
	eventually(t, b, PeerConnected, PeerConnected, PeerInvalid)
	eventually(t, c, PeerInvalid, PeerInvalid, PeerConnected)
	// A refused peer does not make the daemon unready: it serves the
	// nodes that agree.
	if ready, err := Query(ctx(t, 5*time.Second), a.socket); !ready || err != nil {
		t.Errorf("-q: %v, %v; want ready", ready, err)
	}
}

func TestStopTellsPeersAndRestartReconnects(t *testing.T) {
	lns, addrs := listeners(t, 3)
	// Node 2 never runs: nothing listens at its address.
	_ = lns[2].Close()
	a := start(t, lns[0], addrs)
	b := start(t, lns[1], addrs)
	eventually(t, a, PeerConnected, PeerConnected, PeerUnavailable)
	eventually(t, b, PeerConnected, PeerConnected, PeerUnavailable)

	b.d.Stop()
	if err := <-b.errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	eventually(t, a, PeerConnected, PeerDisconnected, PeerUnavailable)
	if _, err := os.Stat(b.socket); err == nil {
		t.Errorf("a stopped daemon left its control socket %s", b.socket)
	}
	if _, err := Query(ctx(t, 5*time.Second), b.socket); err == nil {
		t.Errorf("-q answered for a stopped daemon")
	}
	s, err := QueryNodeStatus(ctx(t, 5*time.Second), a.socket)
	if err != nil {
		t.Fatal(err)
	}
	if s.Nodes["1"].Status != NodeUnavailable || s.Nodes["1"].Connections["0"].Status != PeerInvalid || s.Nodes["0"].Connections["1"].Status != PeerDisconnected {
		t.Errorf("-N -j after node 1 stopped: %+v", s)
	}

	// The same node comes back on its address.
	ln, err := net.Listen("tcp", addrs[1])
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addrs[1], err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	start(t, ln, addrs)
	eventually(t, a, PeerConnected, PeerConnected, PeerUnavailable)
}

func TestHangStopsAnswering(t *testing.T) {
	lns, addrs := listeners(t, 2)
	a := start(t, lns[0], addrs)
	b := start(t, lns[1], addrs)
	eventually(t, a, PeerConnected, PeerConnected)

	b.d.Hang()
	if ready, err := Query(ctx(t, 500*time.Millisecond), b.socket); ready || err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("-q to a hung daemon: %v, %v; want no answer", ready, err)
	}
	eventually(t, a, PeerConnected, PeerDisconnected)

	b.d.Resume()
	if ready, err := Query(ctx(t, 5*time.Second), b.socket); !ready || err != nil {
		t.Errorf("-q after resume: %v, %v; want ready", ready, err)
	}
	eventually(t, a, PeerConnected, PeerConnected)

	// A hung daemon still stops.
	b.d.Hang()
	b.d.Stop()
	eventually(t, a, PeerConnected, PeerDisconnected)
}

func TestQueryWithoutDaemon(t *testing.T) {
	socket := filepath.Join(socketDir(t), "cmd.sock")
	if ready, err := Query(ctx(t, 5*time.Second), socket); ready || err == nil || !strings.Contains(err.Error(), socket) {
		t.Errorf("-q without a daemon: %v, %v; want an error naming the socket", ready, err)
	}
}

func TestQueryNotReadyAnswer(t *testing.T) {
	socket := filepath.Join(socketDir(t), "cmd.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		buf := make([]byte, 16)
		_, _ = conn.Read(buf)
		_, _ = conn.Write([]byte(NotReadyAnswer))
	}()
	ready, err := Query(ctx(t, 5*time.Second), socket)
	if ready || err == nil || !strings.Contains(err.Error(), `"NOT_READY\n"`) {
		t.Errorf("-q: %v, %v; want not ready with the daemon's answer", ready, err)
	}
}

func TestNewRefusesNodeNotInList(t *testing.T) {
	lns, addrs := listeners(t, 2)
	_, err := New(Config{ServerPort: DefaultServerPort, NodeConfigFile: "/etc/nvidia-imex/nodes_config.cfg"}, addrs[:1], Options{Listener: lns[1]})
	if err == nil || !strings.Contains(err.Error(), "/etc/nvidia-imex/nodes_config.cfg: this node ("+addrs[1]+") is not in the node list") {
		t.Errorf("got %v", err)
	}
}

func TestRunRefusesBusyControlSocketDir(t *testing.T) {
	lns, addrs := listeners(t, 1)
	cfg := Config{ServerPort: DefaultServerPort, CmdEnabled: true, CmdUnixDomainPath: filepath.Join(socketDir(t), "missing", "cmd.sock")}
	d, err := New(cfg, addrs, Options{Listener: lns[0]})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "IMEX_CMD_UNIX_DOMAIN_PATH") {
		t.Errorf("Run with an unusable control socket: %v", err)
	}
}
