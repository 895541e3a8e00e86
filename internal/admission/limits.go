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

package admission

import (
	"fmt"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/errorlist"
)

// What a review from the API server can hold at most. The webhook's
// Service is reachable by any pod the network lets through, so whatever
// passes these bounds may be hostile; whatever does not, the API server did
// not send, and it is refused unread (HTTP 400 or 413).
const (
	// maxRequestBytes bounds a request body. The API server reads at most
	// 3 MiB of a request that creates or changes an object
	// (MaxRequestBodyBytes, fixed in kube-apiserver), and etcd stores at
	// most 1.5 MiB (its --max-request-bytes default); a review carries the
	// object and, for an UPDATE, the stored one, as JSON, and the request's
	// metadata.
	maxRequestBytes = 7 << 20
	// maxConfigs is the API's own limit on an object's config entries
	// (resource.k8s.io DeviceConfigMaxSize; the same in v1, v1beta2 and
	// v1beta1).
	maxConfigs = resourceapi.DeviceConfigMaxSize
	// maxParametersBytes bounds one entry's opaque.parameters as a review
	// carries them. The API server stores at most 10 KiB
	// (OpaqueParametersMaxLength); its JSON encoder writes <, > and & as
	// \u003c and so on, six bytes for one.
	maxParametersBytes = 6 * resourceapi.OpaqueParametersMaxLength
	// maxNameBytes bounds names: object names are DNS subdomains (253),
	// namespaces DNS labels (63), group, version and kind are shorter.
	maxNameBytes = 253
	// maxUIDBytes bounds the review's UID, which the API server makes a
	// UUID (36 bytes).
	maxUIDBytes = 128
	// maxCauses bounds the causes of one denial: the first ones, and one
	// that says how many more there are.
	maxCauses = 2 * errorlist.Max
	// reviewWorkBytes is what judging one review may hold on top of its
	// body and what is read from it: one config decoded and validated at a
	// time, which allocates at most about 2.5 MB for a config at the API
	// server's size limit with a bad value in every entry
	// (TestDecodeBoundsLargeInvalidConfigs), live or not yet collected:
	// about 256 times the config's size, and never more than its body
	// holds.
	reviewWorkBytes = 4 << 20
	workPerByte     = 256
)

// Limits bound what a replica spends on reviews.
type Limits struct {
	// Timeout bounds a review from its first byte to its answer: reading
	// the headers and the body, and judging it. The API server waits no
	// longer than the webhook's timeoutSeconds (10 s unless set, 30 at
	// most), so there is no use in going on.
	Timeout time.Duration
	// MaxInFlightBytes bounds the memory the reviews in flight hold
	// together (reviewCost): each its body, as much again for what is
	// read from it, and the work of judging it. A review that finds no
	// room waits for it until its time is up, then gets HTTP 429; one that
	// would take more than a quarter of it does not wait (so that it
	// cannot hold up the small reviews behind it) and gets 429 at once.
	MaxInFlightBytes int64
	// MaxConnections bounds the connections open at once; more wait to be
	// accepted.
	MaxConnections int
}

// DefaultLimits admit one of the largest reviews the API server can send
// at a time, beside hundreds of ordinary ones (a claim of a few KiB).
func DefaultLimits() Limits {
	return Limits{Timeout: 10 * time.Second, MaxInFlightBytes: 32 << 20, MaxConnections: 256}
}

// reviewCost is what a review of a body of n bytes reserves.
func reviewCost(n int64) int64 { return 2*n + min(reviewWorkBytes, workPerByte*n) }

// Validate reports limits under which the webhook cannot work.
func (l Limits) Validate() error {
	switch {
	case l.Timeout <= 0:
		return fmt.Errorf("the webhook's timeout must be positive, not %v", l.Timeout)
	case l.MaxInFlightBytes < reviewCost(maxRequestBytes):
		return fmt.Errorf("the webhook's in-flight budget of %d bytes cannot hold the largest review the API server can send (%d bytes with its work)", l.MaxInFlightBytes, reviewCost(maxRequestBytes))
	case l.MaxConnections < 1:
		return fmt.Errorf("the webhook must accept at least one connection, not %d", l.MaxConnections)
	}
	return nil
}
