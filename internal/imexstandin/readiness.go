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
	"fmt"
	"time"
)

// Checker says whether the node's IMEX daemon is ready, by asking its
// control socket what nvidia-imex-ctl -q --u=<socket> asks. It has the
// shape of the node state's IMEXReadiness (this layer may not import the
// node state; a test checks that it satisfies the interface), so the
// plugin can use it in place of AlwaysReady. It works against the
// stand-in and against any daemon that answers -q on a Unix socket the
// same way.
type Checker struct {
	// Socket is the daemon's IMEX_CMD_UNIX_DOMAIN_PATH.
	Socket string
	// Timeout bounds one query; DefaultQueryTimeout when zero. A daemon
	// that does not answer in time is not ready: it may be hung.
	Timeout time.Duration
}

// Ready returns nil when the daemon answers READY, and otherwise an error
// that names the domain, the socket and what went wrong. A node's daemon
// serves one IMEX domain, the node's own: domain is for the message only,
// the daemon cannot be asked which NVLink domain its node list spans.
func (c Checker) Ready(ctx context.Context, domain string) error {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultQueryTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := Query(ctx, c.Socket); err != nil {
		return fmt.Errorf("NVLink domain %s: %w", domain, err)
	}
	return nil
}
