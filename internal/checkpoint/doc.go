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

// Package checkpoint is the node's durable record of the claims that gpudra
// has prepared, so that a restarted plugin can finish or roll back half-done
// work, answer a repeated prepare with the same CDI device IDs, and undo
// exactly what it did.
//
// The record is one JSON file, written atomically (temporary file, fsync,
// rename, fsync of the directory) and protected by a SHA-256 checksum, so
// that a torn write or a hand edit is detected instead of being read as
// truth. A file that cannot be trusted is reported, never reset: losing the
// record would leak MIG instances and sharing daemons that nobody would then
// clean up, so the decision belongs to the admin.
//
// The format is versioned. Readers ignore fields they do not know, so fields
// can be added (MIG instance IDs, sharing state) without a new version; a new
// version is needed only when an existing field changes meaning.
package checkpoint
