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

// Package controller is gpudra-controller: the cluster-side half of gpudra.
//
// A replica serves the validating admission webhook (package admission)
// over HTTPS with a certificate from package servingcert, the fleet
// accounting, or both, and /metrics, /healthz and /readyz over HTTP. The
// chart runs them apart (the accounting's memory grows with the fleet, the
// webhook's does not). One replica at a time, the leader (client-go leader
// election on a Lease), also
//
//   - creates and renews the webhook's certificate and injects its CA
//     bundle (unless cert-manager does);
//   - with FleetAccounting, watches ResourceSlices (kept compact,
//     fleet.Compactor), ResourceClaims, DeviceClasses, Pods and Nodes and
//     exports the fleet's accounting (package fleet) as metrics,
//     recomputed after changes but at most once per RecomputeInterval;
//   - with MigSpareNodes, picks from the same recompute the nodes that keep
//     a spare GPU's MIG placements published (package migspares) and
//     writes them into the ConfigMap the plugins in fleet mode read
//     (spares.go);
//   - with FleetAccounting and NVLinkChannels, labels each Node with its
//     GPUs' NVLink domain and publishes one IMEX channel pool per domain
//     (package nvlinkpools).
//
// Only the leader exports fleet metrics, so that summing them over the
// replicas a Prometheus scrapes counts every device once. A replica that
// loses the lease exits, as client-go recommends: its informers and
// caches are then certainly gone, and the Deployment starts it afresh.
//
// Readiness means "can answer admission reviews": a serving certificate is
// loaded. Liveness fails when the leader could not renew its lease for
// longer than the lease lasts.
package controller
