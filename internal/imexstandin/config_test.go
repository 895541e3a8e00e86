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
	"strings"
	"testing"
)

// stockConfig is the part of NVIDIA's stock imexd.cfg (as shipped in
// NVIDIA's DRA driver's compute-domain-daemon-config template) that the
// stand-in reads, with its comments.
const stockConfig = `# NVIDIA IMEX configuration file.
# Note: This configuration file is read during IMEX startup. So, IMEX
# service restart is required for new settings to take effect.
LOG_LEVEL=4
LOG_FILE_NAME=
DAEMONIZE=0
BIND_INTERFACE_IP=
#   Description: Starting TCP port number for IMEX peer communication
SERVER_PORT=50000
IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg
NETWORK_INTERFACE=
IMEX_WAIT_FOR_QUORUM=RECOVERY
IMEX_ENABLE_AUTH_ENCRYPTION=0
IMEX_AUTH_ENCRYPTION_MODE=SSL_TLS
IMEX_CMD_ENABLED=1
IMEX_CMD_BIND_INTERFACE_IP=
IMEX_CMD_PORT=50005
IMEX_CMD_UNIX_DOMAIN_PATH=/run/nvidia-imex/cmd.sock
IMEX_NODE_DISCONNECTED_GRACE_TIME=-1
`

func TestParseStockConfig(t *testing.T) {
	c, err := ParseConfig("imexd.cfg", strings.NewReader(stockConfig))
	if err != nil {
		t.Fatal(err)
	}
	if c.ServerPort != 50000 || c.NodeConfigFile != DefaultNodeConfigFile || c.WaitForQuorum != QuorumRecovery ||
		!c.CmdEnabled || c.CmdPort != 50005 || c.CmdUnixDomainPath != "/run/nvidia-imex/cmd.sock" || c.BindInterfaceIP != "" {
		t.Errorf("parsed %+v", c)
	}
	if c.Other["IMEX_NODE_DISCONNECTED_GRACE_TIME"] != "-1" {
		t.Errorf("other keys not kept: %v", c.Other)
	}
}

func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig("imexd.cfg", strings.NewReader("# nothing set\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.ServerPort != DefaultServerPort || c.NodeConfigFile != DefaultNodeConfigFile || c.WaitForQuorum != QuorumRecovery || c.CmdPort != DefaultCmdPort {
		t.Errorf("defaults %+v", c)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"not key=value": {"SERVER_PORT 50000\n", "imexd.cfg:1: \"SERVER_PORT 50000\" is not KEY=VALUE"},
		"typo":          {"# c\nSERVER_PROT=1\n", "imexd.cfg:2: unknown key SERVER_PROT (did you mean SERVER_PORT?)"},
		"port":          {"SERVER_PORT=70000\n", "imexd.cfg:1: SERVER_PORT=70000: not a port: write a number from 0 to 65535"},
		"bind ip":       {"BIND_INTERFACE_IP=node-1\n", "imexd.cfg:1: BIND_INTERFACE_IP=node-1: not an IP address"},
		"quorum":        {"IMEX_WAIT_FOR_QUORUM=ALL\n", "must be NONE or RECOVERY"},
		"cmd enabled":   {"IMEX_CMD_ENABLED=yes\n", "IMEX_CMD_ENABLED=yes: must be 0 or 1"},
		"duplicate":     {"SERVER_PORT=1\nSERVER_PORT=2\n", "imexd.cfg:2: SERVER_PORT is set again (first on line 1)"},
		"node file":     {"IMEX_NODE_CONFIG_FILE=\n", "empty: name the node list file"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig("imexd.cfg", strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestParseNodes(t *testing.T) {
	nodes, err := ParseNodes("nodes_config.cfg", strings.NewReader("10.0.0.1\n\n# tray 2\n10.0.0.2\ntray-3.rack-a\n127.0.0.1:40001\nfd00::1\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.1", "10.0.0.2", "tray-3.rack-a", "127.0.0.1:40001", "fd00::1"}
	if strings.Join(nodes, ",") != strings.Join(want, ",") {
		t.Errorf("got %v, want %v", nodes, want)
	}
}

func TestParseNodesErrors(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"empty":      {"# none\n", "nodes_config.cfg: no nodes: list every node"},
		"two a line": {"10.0.0.1 10.0.0.2\n", "nodes_config.cfg:1: \"10.0.0.1 10.0.0.2\": write one IP address or host name per line"},
		"duplicate":  {"10.0.0.1\n10.0.0.1\n", "nodes_config.cfg:2: 10.0.0.1 is listed again (first on line 1)"},
		"garbage":    {"10.0.0.1\nnode_1!\n", "nodes_config.cfg:2: \"node_1!\" is neither an IP address nor a host name"},
		"bad port":   {"127.0.0.1:99999\n", "is neither an IP address nor a host name"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseNodes("nodes_config.cfg", strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
