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

package gpudratest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpudra/gpudra/internal/imexstandin"
)

// IMEXDaemon runs a stand-in IMEX daemon of a one-node domain in the test
// process, from real config files (imexd.cfg, nodes_config.cfg), waits
// until it serves, and returns it and its control socket. It is stopped
// when the test ends.
func IMEXDaemon(t testing.TB) (*imexstandin.Daemon, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "imex") // short: a socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nodeFile, socket := filepath.Join(dir, "nodes_config.cfg"), filepath.Join(dir, "imex_ctrl.sock")
	cfgFile := filepath.Join(dir, "imexd.cfg")
	if err := os.WriteFile(nodeFile, []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgFile, []byte("IMEX_NODE_CONFIG_FILE="+nodeFile+"\nIMEX_CMD_ENABLED=1\nIMEX_CMD_UNIX_DOMAIN_PATH="+socket+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := imexstandin.LoadConfig(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := imexstandin.LoadNodes(cfg.NodeConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	d, err := imexstandin.New(cfg, nodes, imexstandin.Options{Listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.Run(context.Background()) }()
	t.Cleanup(d.Stop)
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return d.Ready(), nil
	}); err != nil {
		t.Fatal("the stand-in IMEX daemon never served")
	}
	return d, socket
}
