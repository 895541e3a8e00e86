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

// Package servingcert gives gpudra-controller's admission webhook a TLS
// serving certificate that the API server trusts, without cert-manager.
//
// The certificate authority and the serving certificate live in one
// Secret (type kubernetes.io/tls, plus ca.crt, ca.key and ca-bundle.crt).
// The leader creates it, renews what is due, and injects ca-bundle.crt as
// the caBundle of the webhook configurations; every replica serves the
// certificate it reads from the Secret, re-read periodically, so a rotation
// reaches all of them without a restart.
//
// Rotation never leaves the API server without trust in what a replica
// serves:
//
//   - a serving certificate is renewed once less than a third of its
//     lifetime is left, signed by the same CA, so the caBundle does not
//     change;
//   - a CA is renewed once less than a third of its lifetime is left; the
//     new CA joins the bundle next to the old one (kept until it expires),
//     and serving certificates are signed by it only once the bundle with
//     it has had CAPropagation to reach the API server.
//
// The rotation is gpudra's own, not a maintained rotator's:
// open-policy-agent/cert-controller, the usual choice, renews the CA and
// the serving certificate in one step and puts only the new CA in the
// caBundle, so until every API server and every replica has the new pair
// the webhook's handshakes fail (and with failurePolicy Fail, claims with
// gpudra configs are refused); it reaches replicas through files mounted
// from the Secret (the kubelet's sync delay) or by restarting them; and it
// runs inside controller-runtime's manager and cache, which
// gpudra-controller, built on client-go informers, does not use.
// Certificates and keys are parsed and PEM-encoded by client-go
// (k8s.io/client-go/util/cert, util/keyutil).
//
// When the chart asks for cert-manager instead, FileSource serves the
// certificate cert-manager writes into the mounted Secret, re-read when it
// changes, and cert-manager's CA injector fills the caBundle.
package servingcert
