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

package fakenodes

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// Building nodes side by side gives what building them one by one gives.
func TestSlicesParallel(t *testing.T) {
	ctx := context.Background()
	all, err := Slices(ctx, "mixed", 6, "gpu.gpudra.io")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 1; i <= 6; i++ {
		one, err := Node(ctx, "mixed", NodeName(i), "gpu.gpudra.io", t.TempDir(), Pool{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range one {
			want = append(want, sliceJSON(t, s))
		}
	}
	var got []string
	for _, s := range all {
		got = append(got, sliceJSON(t, s))
	}
	if !slices.Equal(got, want) {
		t.Errorf("parallel build differs from one node at a time")
	}
}

// A bad profile is named in the error, which neither names a flag of some
// binary nor the throw-away directory the fake GPUs lived in.
func TestSlicesUnknownProfile(t *testing.T) {
	_, err := Slices(context.Background(), "dgx-z9", 1, "gpu.gpudra.io")
	if err == nil {
		t.Fatal("no error for an unknown profile")
	}
	msg := err.Error()
	for _, bad := range []string{"--fake", "gpudra-fakenodes-", os.TempDir() + "/", "/dev/shm"} {
		if strings.Contains(msg, bad) {
			t.Errorf("error %q contains %q", msg, bad)
		}
	}
	if !strings.Contains(msg, `"dgx-z9"`) || !strings.Contains(msg, "dgx-h100") {
		t.Errorf("error %q should name the profile and the built-in ones", msg)
	}
}

func sliceJSON(t *testing.T, s *resourceapi.ResourceSlice) string {
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
