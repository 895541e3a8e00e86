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

package nodestate

import "sync"

// keyedMutex serializes work per key (a claim UID) without serializing
// different keys against each other.
type keyedMutex struct {
	// mu guards locks (and each entry's refs); held only to find, count
	// and drop entries, never while a key is waited for.
	mu    sync.Mutex
	locks map[string]*keyedEntry
}

// keyedEntry is one key's lock, kept while anyone holds or waits for it.
type keyedEntry struct {
	// mu is the key's lock: held by whoever does the key's work.
	mu sync.Mutex
	// refs counts the holders and waiters; guarded by keyedMutex.mu.
	refs int
}

// lock blocks until the key is free and returns the function that frees it.
func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedEntry{}
	}
	e := k.locks[key]
	if e == nil {
		e = &keyedEntry{}
		k.locks[key] = e
	}
	e.refs++
	k.mu.Unlock()

	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
