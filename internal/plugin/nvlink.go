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

import "github.com/gpudra/gpudra/internal/slicebuilder"

// nvlinkDomain is the node's multi-node NVLink domain, as the node's GPUs
// were last published with it (slicebuilder.AttrNVLinkDomain): the same
// value gpudra-controller labels the node with and names the domain's
// channel pool after, so the node prepares exactly the channels of the
// pool whose node selector lets its pods in. "" when no GPU carries it,
// or when two disagree (the controller then labels the node with none).
func (p *publisher) nvlinkDomain() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	domain := ""
	for _, attrs := range p.attributes {
		a, ok := attrs[slicebuilder.AttrNVLinkDomain]
		if !ok || a.StringValue == nil {
			continue
		}
		if domain != "" && domain != *a.StringValue {
			return ""
		}
		domain = *a.StringValue
	}
	return domain
}
