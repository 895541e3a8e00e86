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

// Package imexstandin is a stand-in for NVIDIA's IMEX daemon
// (nvidia-imex) and its control client (nvidia-imex-ctl), for tests: it
// reads the real imexd.cfg and nodes_config.cfg, listens for its peers on
// SERVER_PORT over real TCP, refuses a peer whose node list differs (as
// the real daemon refuses differing maps), keeps each peer's state, and
// answers the two control queries the plugin uses (-q and -N -j) on
// IMEX_CMD_UNIX_DOMAIN_PATH. Tests can hang it (it stops answering, as a
// daemon under SIGSTOP does) and stop it (its peers see it go).
//
// It runs in-process (Daemon, for Go tests) or as a process: a binary
// that links the package becomes the daemon when started as
// "fake-nvidia-imex -c <imexd.cfg>" and the control client when started as
// "fake-nvidia-imex-ctl -q|-N -j [--u=<socket>]", for the multi-node local
// cluster, where each node is its own network namespace. The fake backend
// hands the plugin that client as its nvidia-imex-ctl (backend.IMEXCtl),
// so the plugin asks the stand-in exactly as it asks NVIDIA's daemon.
//
// It imports and exports no GPU memory: what it makes testable is the
// daemon's membership and readiness, not IMEX channels' memory sharing.
// Facts it follows: ../../docs/nvlink.md and the research notes on NVLink
// domains (sections 3.2 and 3.4).
package imexstandin

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/gpudra/gpudra/internal/spelling"
)

// Defaults of the keys the stand-in uses, from NVIDIA's stock imexd.cfg.
const (
	DefaultServerPort     = 50000
	DefaultCmdPort        = 50005
	DefaultNodeConfigFile = "/etc/nvidia-imex/nodes_config.cfg"
)

// Quorum modes of IMEX_WAIT_FOR_QUORUM.
const (
	QuorumNone     = "NONE"
	QuorumRecovery = "RECOVERY"
)

// knownKeys are the keys of NVIDIA's stock imexd.cfg. The stand-in uses
// only a few; it accepts the others and keeps them, and it refuses a key
// outside this list, so that a misspelt key does not silently fall back
// to its default.
var knownKeys = []string{
	"LOG_LEVEL", "LOG_FILE_NAME", "STATS_FILE_NAME", "LOG_APPEND_TO_LOG",
	"LOG_FILE_MAX_SIZE", "LOG_MAX_ROTATE_COUNT", "LOG_USE_SYSLOG", "DAEMONIZE",
	"BIND_INTERFACE_IP", "SERVER_PORT", "IMEX_NODE_CONFIG_FILE", "NETWORK_INTERFACE",
	"IMEX_WAIT_FOR_QUORUM", "IMEX_ENABLE_AUTH_ENCRYPTION", "IMEX_AUTH_ENCRYPTION_MODE",
	"IMEX_AUTH_SOURCE", "IMEX_SERVER_KEY", "IMEX_SERVER_CERT", "IMEX_SERVER_CERT_AUTH",
	"IMEX_CLIENT_KEY", "IMEX_CLIENT_CERT", "IMEX_CLIENT_CERT_AUTH",
	"IMEX_SECURITY_TARGET_OVERRIDE", "IMEX_GSS_SERVICE_NAME", "IMEX_GSS_TIMEOUT_SEC",
	"IMEX_GSS_RETRY_INTERVAL_SEC", "IMEX_GSS_SEC_CONTEXT_LIFETIME_SEC",
	"IMEX_GSS_SHUTDOWN_ON_FAILURE", "IMEX_CMD_ENABLED", "IMEX_CMD_BIND_INTERFACE_IP",
	"IMEX_CMD_PORT", "IMEX_CMD_UNIX_DOMAIN_PATH", "IMEX_NODE_DISCONNECTED_GRACE_TIME",
}

// Config is what the stand-in takes from imexd.cfg.
type Config struct {
	// ServerPort is SERVER_PORT: where every daemon of the domain listens
	// for its peers.
	ServerPort int
	// BindInterfaceIP is BIND_INTERFACE_IP; empty means "the address of
	// this node in the node list".
	BindInterfaceIP string
	// NodeConfigFile is IMEX_NODE_CONFIG_FILE, the node list.
	NodeConfigFile string
	// WaitForQuorum is IMEX_WAIT_FOR_QUORUM: NONE or RECOVERY.
	WaitForQuorum string
	// CmdEnabled is IMEX_CMD_ENABLED: whether the control service runs.
	CmdEnabled bool
	// CmdUnixDomainPath is IMEX_CMD_UNIX_DOMAIN_PATH, the control
	// service's Unix socket; the stand-in serves control queries only
	// there.
	CmdUnixDomainPath string
	// CmdPort and CmdBindInterfaceIP are IMEX_CMD_PORT and
	// IMEX_CMD_BIND_INTERFACE_IP, parsed and checked; the stand-in does
	// not serve control queries over TCP.
	CmdPort            int
	CmdBindInterfaceIP string
	// Other holds every other key of the file, as written.
	Other map[string]string
}

// LoadConfig reads and checks an imexd.cfg.
func LoadConfig(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("IMEX config: %w", err)
	}
	defer f.Close()
	return ParseConfig(path, f)
}

// ParseConfig reads an imexd.cfg from r: KEY=VALUE lines, blank lines and
// lines starting with #. path names the file in errors.
func ParseConfig(path string, r io.Reader) (Config, error) {
	c := Config{
		ServerPort:     DefaultServerPort,
		NodeConfigFile: DefaultNodeConfigFile,
		WaitForQuorum:  QuorumRecovery,
		CmdPort:        DefaultCmdPort,
		Other:          map[string]string{},
	}
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		key, value, ok := strings.Cut(text, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if !ok || key == "" {
			return Config{}, fmt.Errorf("%s:%d: %q is not KEY=VALUE: write one setting per line as KEY=VALUE, or start the line with # to make it a comment", path, line, text)
		}
		if !known(key) {
			hint := ""
			if s := spelling.Closest(key, knownKeys); s != "" {
				hint = fmt.Sprintf(" (did you mean %s?)", s)
			}
			return Config{}, fmt.Errorf("%s:%d: unknown key %s%s: use a key of NVIDIA's imexd.cfg", path, line, key, hint)
		}
		if first, dup := seen[key]; dup {
			return Config{}, fmt.Errorf("%s:%d: %s is set again (first on line %d): keep one of the two", path, line, key, first)
		}
		seen[key] = line
		if err := c.set(key, value); err != nil {
			return Config{}, fmt.Errorf("%s:%d: %s=%s: %w", path, line, key, value, err)
		}
	}
	if err := sc.Err(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func known(key string) bool {
	for _, k := range knownKeys {
		if k == key {
			return true
		}
	}
	return false
}

func (c *Config) set(key, value string) error {
	switch key {
	case "SERVER_PORT":
		p, err := port(value)
		if err != nil {
			return err
		}
		c.ServerPort = p
	case "IMEX_CMD_PORT":
		if value == "" {
			c.CmdPort = 0
			return nil
		}
		p, err := port(value)
		if err != nil {
			return err
		}
		c.CmdPort = p
	case "BIND_INTERFACE_IP", "IMEX_CMD_BIND_INTERFACE_IP":
		if value != "" && net.ParseIP(value) == nil {
			return fmt.Errorf("not an IP address: write an IPv4 or IPv6 address, or leave it empty")
		}
		if key == "BIND_INTERFACE_IP" {
			c.BindInterfaceIP = value
		} else {
			c.CmdBindInterfaceIP = value
		}
	case "IMEX_NODE_CONFIG_FILE":
		if value == "" {
			return fmt.Errorf("empty: name the node list file (default %s)", DefaultNodeConfigFile)
		}
		c.NodeConfigFile = value
	case "IMEX_WAIT_FOR_QUORUM":
		if value != QuorumNone && value != QuorumRecovery {
			return fmt.Errorf("must be %s or %s", QuorumNone, QuorumRecovery)
		}
		c.WaitForQuorum = value
	case "IMEX_CMD_ENABLED":
		switch value {
		case "0":
			c.CmdEnabled = false
		case "1":
			c.CmdEnabled = true
		default:
			return fmt.Errorf("must be 0 or 1")
		}
	case "IMEX_CMD_UNIX_DOMAIN_PATH":
		c.CmdUnixDomainPath = value
	default:
		c.Other[key] = value
	}
	return nil
}

func port(value string) (int, error) {
	p, err := strconv.Atoi(value)
	if err != nil || p < 0 || p > 65535 {
		return 0, fmt.Errorf("not a port: write a number from 0 to 65535")
	}
	return p, nil
}

// LoadNodes reads a nodes_config.cfg.
func LoadNodes(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("IMEX node list: %w", err)
	}
	defer f.Close()
	return ParseNodes(path, f)
}

// ParseNodes reads a node list from r: one IP address or host name per
// line, for every node of the IMEX domain, in the same order on every
// node (a node's place in the list is its index); blank lines and lines
// starting with # are skipped. path names the file in errors.
//
// The stand-in also takes host:port, so that several daemons of one test
// can share 127.0.0.1 on ephemeral ports; the real file has no ports (a
// peer listens on SERVER_PORT).
func ParseNodes(path string, r io.Reader) ([]string, error) {
	var nodes []string
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if strings.ContainsAny(text, " \t,") {
			return nil, fmt.Errorf("%s:%d: %q: write one IP address or host name per line", path, line, text)
		}
		if !validNode(text) {
			return nil, fmt.Errorf("%s:%d: %q is neither an IP address nor a host name: write one IP address or host name per line", path, line, text)
		}
		if first, dup := seen[text]; dup {
			return nil, fmt.Errorf("%s:%d: %s is listed again (first on line %d): list each node once", path, line, text, first)
		}
		seen[text] = line
		nodes = append(nodes, text)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%s: no nodes: list every node of the IMEX domain, one IP address or host name per line", path)
	}
	return nodes, nil
}

func validNode(s string) bool {
	host := s
	if h, p, err := net.SplitHostPort(s); err == nil {
		if _, err := port(p); err != nil {
			return false
		}
		host = h
	}
	if net.ParseIP(host) != nil {
		return true
	}
	if host == "" || len(host) > 253 {
		return false
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}
