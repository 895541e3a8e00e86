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

import (
	"fmt"

	"github.com/gpudra/gpudra/internal/errorlist"
)

// checkNothingPrepared is New's check when the checkpoint file is missing:
// a fresh node has no CDI spec of this driver either. Specs without a
// checkpoint mean the record of prepared claims was lost (the file was
// deleted, the plugin data directory wiped) while their containers may
// still run; starting would take the specs for stale ones and delete them,
// and take the claims' MIG instances for an admin's. Only the admin can
// tell, so the plugin refuses to start and says what to do.
//
// MIG instances alone prove nothing: without a spec naming them, gpudra
// cannot tell its own from an admin's, and it never destroys an admin's.
func checkNothingPrepared(opts Options) error {
	uids, err := opts.CDI.ListClaimUIDs()
	if err != nil {
		return fmt.Errorf("checkpoint %s is missing; looking for CDI specs of prepared claims: %w", opts.Checkpoint.Path(), err)
	}
	if len(uids) == 0 {
		return nil
	}
	listed := make([]error, len(uids))
	for i, uid := range uids {
		listed[i] = fmt.Errorf("%s", uid)
	}
	return fmt.Errorf("checkpoint %s is missing, but %s holds CDI specs of %s for %d claim(s): %v. "+
		"gpudra has lost its record of claims it prepared on this node (was the file deleted, or the plugin data directory wiped?), "+
		"and starting now would delete the specs of containers that may be running and leak the claims' MIG instances. "+
		"Either restore the checkpoint file from a backup, or, once no pod on node %s uses these claims any more "+
		"(kubectl get resourceclaims -A -o custom-columns=UID:.metadata.uid,NAMESPACE:.metadata.namespace,NAME:.metadata.name,PODS:.status.reservedFor[*].name), "+
		"remove the spec files (%s) "+
		"and any MIG instances they name (nvidia-smi mig -dci, -dgi), then restart the plugin",
		opts.Checkpoint.Path(), opts.CDI.Dir(), opts.DriverName, len(uids), errorlist.Summarize(listed), opts.Node.Name, opts.CDI.SpecFileGlob())
}
