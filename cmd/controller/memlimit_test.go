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

package main

import "testing"

func TestSoftMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limit   string
		ratio   float64
		gomem   bool
		want    int64
		wantErr bool
	}{
		{name: "90 % of 512 Mi", limit: "536870912", ratio: 0.9, want: 483183820},
		{name: "no container limit", limit: "", ratio: 0.9, want: 0},
		{name: "ratio 0 leaves the runtime alone", limit: "536870912", ratio: 0, want: 0},
		{name: "GOMEMLIMIT wins", limit: "536870912", ratio: 0.9, gomem: true, want: 0},
		{name: "not bytes", limit: "512Mi", ratio: 0.9, wantErr: true},
		{name: "ratio above 1", limit: "536870912", ratio: 1.5, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := softMemoryLimit(tc.limit, tc.ratio, tc.gomem)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("got %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
