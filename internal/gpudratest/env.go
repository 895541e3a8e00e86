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
	"os"
	"strconv"
	"testing"
)

// ShortTempDir is a temporary directory with a short path, removed when
// the test ends: a unix socket's path is limited to 108 bytes, and
// t.TempDir() embeds the (long) test name.
func ShortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gpudra-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// EnvInt is the environment variable key as a whole number not below
// zero (an iteration count, a seed), def when it is unset; anything else
// fails the test, rather than running another number of iterations than
// the one asked for.
func EnvInt(t testing.TB, key string, def int) int {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a whole number, 0 or more", key, v)
	}
	return n
}
