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
	"strings"
	"testing"
	"time"
)

func TestCheckerFollowsTheDaemon(t *testing.T) {
	lns, addrs := listeners(t, 1)
	n := start(t, lns[0], addrs)
	c := Checker{Socket: n.socket}
	if err := c.Ready(ctx(t, 5*time.Second), "uuid.1"); err != nil {
		t.Fatalf("ready daemon: %v", err)
	}
	n.d.Hang()
	err := Checker{Socket: n.socket, Timeout: 500 * time.Millisecond}.Ready(context.Background(), "uuid.1")
	if err == nil || !strings.Contains(err.Error(), "NVLink domain uuid.1") || !strings.Contains(err.Error(), "did not answer in time") {
		t.Errorf("hung daemon: %v; want an error naming the domain and the missing answer", err)
	}
	n.d.Resume()
	if err := c.Ready(ctx(t, 5*time.Second), "uuid.1"); err != nil {
		t.Errorf("resumed daemon: %v", err)
	}
	n.d.Stop()
	if err := c.Ready(ctx(t, 5*time.Second), "uuid.1"); err == nil || !strings.Contains(err.Error(), n.socket) {
		t.Errorf("stopped daemon: %v; want an error naming the socket", err)
	}
}
