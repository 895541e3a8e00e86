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

package plugin

import (
	"errors"
	"strings"
	"testing"
)

func TestBounded(t *testing.T) {
	sentinel := errors.New("sentinel")
	short := errors.New("short")
	if got := bounded(short); got != short {
		t.Errorf("bounded(short) = %v, want the error itself", got)
	}
	long := errors.Join(sentinel, errors.New(strings.Repeat("é", maxClaimErrorBytes)))
	got := bounded(long)
	if n := len(got.Error()); n > maxClaimErrorBytes+100 {
		t.Errorf("bounded message is %d bytes, want at most %d plus a note", n, maxClaimErrorBytes)
	}
	if !strings.HasPrefix(got.Error(), "sentinel\né") || !strings.Contains(got.Error(), "bytes more; the plugin's log has the whole message") {
		t.Errorf("bounded message does not keep the start and say it was cut: %.80s ... %.80s", got, got.Error()[len(got.Error())-80:])
	}
	if !strings.HasSuffix(strings.Split(got.Error(), "...")[0], "é") {
		t.Error("the cut split a UTF-8 character")
	}
	if !errors.Is(got, sentinel) {
		t.Error("the bounded error no longer wraps the original")
	}
}
