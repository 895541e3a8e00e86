#!/usr/bin/env bash
# The local cluster's PKI with openssl: a CA, the API server's serving cert,
# client certs for the admin (system:masters, also used by the control plane,
# kube-proxy and the API server towards the kubelet) and for the kubelet
# (system:node:<node>), the service-account key pair, and kubeconfigs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
P=$STATE/pki
mkdir -p "$P"; cd "$P"
[ -e done ] && exit 0
openssl genrsa -out ca.key 2048 2>/dev/null
openssl req -x509 -new -key ca.key -subj "/CN=gpudra-e2e-ca" -days 30 -out ca.crt 2>/dev/null
openssl genrsa -out sa.key 2048 2>/dev/null
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null

# cert NAME SUBJECT [SAN]: a key and a cert signed by the CA.
cert() {
  local name=$1 subj=$2 san=${3:-}
  openssl genrsa -out "$name.key" 2048 2>/dev/null
  openssl req -new -key "$name.key" -subj "$subj" -out "$name.csr" 2>/dev/null
  if [ -n "$san" ]; then
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" >"$name.ext"
  else
    printf 'extendedKeyUsage=clientAuth\n' >"$name.ext"
  fi
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
    -extfile "$name.ext" -out "$name.crt" 2>/dev/null
}
cert apiserver "/CN=kube-apiserver" \
  "IP:$NODE_IP,IP:127.0.0.1,IP:$SERVICE_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert admin "/O=system:masters/CN=gpudra-e2e-admin"
cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME"

kubeconfig() {
  cat >"$1.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: gpudra-e2e
  cluster:
    server: https://$NODE_IP:$APISERVER_PORT
    certificate-authority: $P/ca.crt
users:
- name: $1
  user:
    client-certificate: $P/$1.crt
    client-key: $P/$1.key
contexts:
- name: gpudra-e2e
  context: {cluster: gpudra-e2e, user: $1}
current-context: gpudra-e2e
KC
}
kubeconfig admin
kubeconfig kubelet
touch done
